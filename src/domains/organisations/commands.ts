import type { Executor } from '../../platform/db/knex.js';
import { ConflictError, NotFoundError } from '../../platform/http/errors.js';
import type { Page } from '../../platform/http/pagination.js';
import type { DeploymentScope, OrganisationScope } from '../../access/tenancy/scope.js';
import { insertOrganisation, listOrganisations, lockOrganisation, updateOrganisation, type OrganisationRow } from './repository.js';

const notFound = () => new NotFoundError('No such organisation.');

/** Locks the scope's organisation for the change; one deleted since the scope was resolved is gone (404). */
async function lockLive(tx: Executor, scope: OrganisationScope): Promise<OrganisationRow> {
  const org = await lockOrganisation(tx, scope.organisationId);
  if (!org || org.deleted_at !== null) throw notFound();
  return org;
}

export async function createOrganisation(db: Executor, name: string): Promise<OrganisationRow> {
  return insertOrganisation(db, name);
}

export async function renameOrganisation(db: Executor, scope: OrganisationScope, name: string): Promise<OrganisationRow> {
  return db.transaction(async (tx) => {
    await lockLive(tx, scope);
    return updateOrganisation(tx, scope.organisationId, { name });
  });
}

export async function deleteOrganisation(db: Executor, scope: OrganisationScope): Promise<void> {
  await db.transaction(async (tx) => {
    await lockLive(tx, scope);
    await updateOrganisation(tx, scope.organisationId, { deleted: true });
  });
}

export async function undeleteOrganisation(db: Executor, scope: OrganisationScope): Promise<OrganisationRow> {
  return db.transaction(async (tx) => {
    const org = await lockOrganisation(tx, scope.organisationId);
    if (!org) throw notFound();
    if (org.deleted_at === null) throw new ConflictError('The organisation is not deleted.', 'not_deleted');
    return updateOrganisation(tx, scope.organisationId, { deleted: false });
  });
}

export async function listVisibleOrganisations(
  db: Executor,
  scope: DeploymentScope,
  page: Page,
  showDeleted: boolean,
  name?: string,
): Promise<OrganisationRow[]> {
  return listOrganisations(db, scope.principal, page, showDeleted, name);
}
