import type { Executor } from '../db/knex.js';
import type { Principal } from '../auth/principal.js';
import { requireAdmin, requireOperator } from '../auth/access.js';
import { ConflictError, ForbiddenError, NotFoundError } from '../errors.js';
import type { Page } from '../http/pagination.js';
import { findOrganisation, insertOrganisation, listOrganisations, updateOrganisation, type OrganisationRow } from './repository.js';

const notFound = () => new NotFoundError('No such organisation.');

export async function createOrganisation(db: Executor, p: Principal, name: string): Promise<OrganisationRow> {
  requireOperator(p);
  return insertOrganisation(db, name);
}

export async function getOrganisation(db: Executor, p: Principal, id: number): Promise<OrganisationRow> {
  // The operator may look at a soft-deleted organisation (to decide on undelete); nobody else can reach one.
  const org = await findOrganisation(db, p, id, { includeDeleted: p.scope === 'operator' });
  if (!org) throw notFound();
  return org;
}

export async function renameOrganisation(db: Executor, p: Principal, id: number, name: string): Promise<OrganisationRow> {
  return db.transaction(async (tx) => {
    if (!(await findOrganisation(tx, p, id, { includeDeleted: false, forUpdate: true }))) throw notFound();
    requireAdmin(p);
    return updateOrganisation(tx, id, { name });
  });
}

export async function deleteOrganisation(db: Executor, p: Principal, id: number): Promise<void> {
  await db.transaction(async (tx) => {
    if (!(await findOrganisation(tx, p, id, { includeDeleted: false, forUpdate: true }))) throw notFound();
    requireOperator(p);
    await updateOrganisation(tx, id, { deleted: true });
  });
}

export async function undeleteOrganisation(db: Executor, p: Principal, id: number): Promise<OrganisationRow> {
  return db.transaction(async (tx) => {
    const org = await findOrganisation(tx, p, id, { includeDeleted: true, forUpdate: true });
    if (!org) throw notFound();
    requireOperator(p);
    if (org.deleted_at === null) throw new ConflictError('The organisation is not deleted.', 'not_deleted');
    return updateOrganisation(tx, id, { deleted: false });
  });
}

export async function listVisibleOrganisations(db: Executor, p: Principal, page: Page, showDeleted: boolean): Promise<OrganisationRow[]> {
  if (p.scope === 'project') throw new ForbiddenError('A project token cannot list organisations.');
  return listOrganisations(db, p, page, showDeleted);
}
