import { hotQuery, type Executor, type Knex } from '../db/knex.js';
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

/** A project's columns, named (a prepared statement's `*` would break when a migration adds one). */
const PROJECT_COLUMNS = [
  'id',
  'organisation_id',
  'name',
  'environment',
  'issuer',
  'wallet_webhook_url',
  'wallet_webhook_secret_enc',
  'wallet_webhook_secret_prev_enc',
  'wallet_webhook_secret_prev_expires_at',
  'require_verified_email',
  'created_at',
  'updated_at',
  'deleted_at',
] as const satisfies ReadonlyArray<keyof ProjectRow>;

/**
 * visibleProjects' rule for one project, as the prepared statement every project-scoped request
 * runs (db/knex.ts hotQuery): a project token reaches its own project only, an organisation
 * token its organisation's, the operator any.
 */
export async function findVisibleProject(db: Executor, p: Principal, id: number): Promise<ProjectRow | undefined> {
  if (p.scope === 'project' && p.projectId !== id) return undefined;
  const rows = await hotQuery<ProjectRow>(
    db,
    'custody_visible_project',
    `SELECT ${PROJECT_COLUMNS.map((c) => `p.${c}`).join(', ')}
       FROM projects p JOIN organisations o ON o.id = p.organisation_id
      WHERE p.id = $1 AND ($2::bigint IS NULL OR p.organisation_id = $2::bigint) AND p.deleted_at IS NULL AND o.deleted_at IS NULL`,
    [id, p.scope === 'organisation' ? p.organisationId : null],
  );
  return rows[0];
}
