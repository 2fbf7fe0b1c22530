import { hotQuery, type Executor, type Knex } from '../../platform/db/knex.js';
import type { Principal } from '../auth/principal.js';
import type { OrganisationRow } from '../../domains/organisations/repository.js';
import type { ProjectRow } from '../../domains/projects/repository.js';

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
export const PROJECT_COLUMNS = [
  'id',
  'uid',
  'organisation_id',
  'name',
  'environment',
  'issuer',
  'wallet_webhook_url',
  'wallet_webhook_secret_enc',
  'wallet_webhook_secret_prev_enc',
  'wallet_webhook_secret_prev_expires_at',
  'require_verified_email',
  'token_claim_name',
  'token_claim_value',
  'audience',
  'created_at',
  'updated_at',
  'deleted_at',
] as const satisfies ReadonlyArray<keyof ProjectRow>;

/**
 * visibleProjects' rule as SQL, for the prepared statements of the hot path: the project `p` of
 * organisation `o` is live and reached by a caller of organisation `organisation` (NULL: the
 * operator, any) and project `project` (NULL: any of the organisation's).
 */
export const projectReachedBy = (organisation: string, project: string, p = 'p', o = 'o'): string =>
  `${p}.deleted_at IS NULL AND ${o}.deleted_at IS NULL AND (${organisation} IS NULL OR ${p}.organisation_id = ${organisation}) AND (${project} IS NULL OR ${p}.id = ${project})`;

/**
 * What a token reaches, as SQL for its statement (`token`: the api_tokens alias): `joins` brings
 * in its organisation and its project, and as `named` (columns PROJECT_COLUMNS) the project whose
 * id is `project` (a parameter) when the token reaches it by projectReachedBy, else NULLs; `live`
 * holds when its organisation is not soft-deleted and its project (for a project token) not deleted.
 */
export const tokenReach = (token: string, project: string, named: string): { joins: string; live: string } => ({
  joins: `JOIN organisations o ON o.id = ${token}.organisation_id
       LEFT JOIN projects p ON p.id = ${token}.project_id
       LEFT JOIN (projects ${named} JOIN organisations ${named}o ON ${named}o.id = ${named}.organisation_id)
              ON ${named}.id = ${project} AND ${projectReachedBy(`${token}.organisation_id`, `${token}.project_id`, named, `${named}o`)}`,
  live: `o.deleted_at IS NULL
        AND (${token}.project_id IS NULL OR p.deleted_at IS NULL)`,
});

/** One project by that rule, as the prepared statement a project-scoped request runs unless its authentication read it already. */
export async function findVisibleProject(db: Executor, p: Principal, id: number): Promise<ProjectRow | undefined> {
  const rows = await hotQuery<ProjectRow>(
    db,
    'custody_visible_project',
    `SELECT ${PROJECT_COLUMNS.map((c) => `p.${c}`).join(', ')}
       FROM projects p JOIN organisations o ON o.id = p.organisation_id
      WHERE p.id = $1 AND ${projectReachedBy('$2::bigint', '$3::bigint')}`,
    [id, p.scope === 'operator' ? null : p.organisationId, p.scope === 'project' ? p.projectId : null],
  );
  return rows[0];
}
