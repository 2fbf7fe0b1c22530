import type { Executor, Knex } from '../db/knex.js';
import type { Principal } from '../auth/principal.js';
import type { OrganisationRow } from '../organisations/repository.js';
import type { ProjectRow } from '../projects/repository.js';

/** Every organisation a caller reaches starts here: the operator sees all, an organisation token its own, a project token none. */
export function visibleOrganisations(db: Executor, p: Principal): Knex.QueryBuilder {
  const q = db('organisations');
  if (p.scope === 'organisation') q.where('id', p.organisationId);
  if (p.scope === 'project') q.whereRaw('false');
  return q;
}

/**
 * Every project a caller reaches starts here: live projects of live organisations, narrowed to
 * what the principal may see, so another tenant's project is simply not found (404).
 */
export function visibleProjects(db: Executor, p: Principal): Knex.QueryBuilder {
  const q = db('projects as p').join('organisations as o', 'o.id', 'p.organisation_id').whereNull('o.deleted_at').whereNull('p.deleted_at').select('p.*');
  if (p.scope === 'organisation') q.where('p.organisation_id', p.organisationId);
  if (p.scope === 'project') q.where('p.id', p.projectId);
  return q;
}

export async function findVisibleOrganisation(db: Executor, p: Principal, id: number, includeDeleted: boolean): Promise<OrganisationRow | undefined> {
  const q = visibleOrganisations(db, p).where('id', id);
  if (!includeDeleted) q.whereNull('deleted_at');
  return (await q.first()) as OrganisationRow | undefined;
}

export async function findVisibleProject(db: Executor, p: Principal, id: number): Promise<ProjectRow | undefined> {
  return (await visibleProjects(db, p).where('p.id', id).first()) as ProjectRow | undefined;
}
