import type { Principal } from '../auth/principal.js';
import type { Executor } from '../../platform/db/knex.js';
import { NotFoundError, ValidationError } from '../../platform/http/errors.js';
import { authorize, type Action } from './policy.js';
import type { TenantRule, TenantScope } from './scope.js';
import type { ProjectRow } from '../../domains/projects/repository.js';
import { findVisibleOrganisation, findVisibleProject } from './visible.js';

/** The validated parts of a request a tenant is named by. */
export interface Naming {
  readonly params: Readonly<Record<string, unknown>>;
  readonly query: Readonly<Record<string, unknown>>;
}

const noProject = () => new NotFoundError('No such project.');

/**
 * The membership endpoints act on the token's project; a wider token names one with `projectId`
 * (missing: 400). Another project than a project token's own is 404, like another tenant's.
 */
function projectIdOf(p: Principal, rule: TenantRule & { level: 'project' }, naming: Naming): number {
  if (rule.from !== 'query') return Number(naming.params['projectId']);
  const named = naming.query['projectId'];
  if (p.scope === 'project') {
    if (named !== undefined && Number(named) !== p.projectId) throw noProject();
    return p.projectId;
  }
  if (named === undefined) {
    throw new ValidationError('This token is not bound to one project: name it with the query parameter projectId.', [
      { in: 'query', path: '/projectId', message: 'is required for an operator or organisation token' },
    ]);
  }
  return Number(named);
}

/**
 * Resolves the tenant an endpoint acts on, once, before its handler: what the caller cannot
 * reach is 404 (another tenant's resources do not exist for it); then the table of
 * access/tenancy/policy.ts says whether it may do the action (403).
 */
export async function resolveScope(
  db: Executor,
  p: Principal,
  rule: TenantRule,
  action: Action,
  naming: Naming,
  named?: { readonly id: number; readonly row: ProjectRow | null },
): Promise<TenantScope> {
  let scope: TenantScope;
  if (rule.level === 'deployment') {
    scope = { level: 'deployment', principal: p };
  } else if (rule.level === 'organisation') {
    const id = Number(naming.params['id']);
    const deleted = rule.deleted === 'shown' || (rule.deleted === 'shownToOperator' && p.scope === 'operator');
    const organisation = await findVisibleOrganisation(db, p, id, deleted);
    if (!organisation) throw new NotFoundError('No such organisation.');
    scope = { level: 'organisation', principal: p, organisationId: id, organisation };
  } else {
    const id = projectIdOf(p, rule, naming);
    // Read with the token when the request named it (access/auth/authenticate.ts), by the same rule.
    const project = named?.id === id ? (named.row ?? undefined) : await findVisibleProject(db, p, id);
    if (!project) throw noProject();
    scope = { level: 'project', principal: p, organisationId: project.organisation_id, projectId: id, project };
  }
  authorize(p, action);
  return scope;
}
