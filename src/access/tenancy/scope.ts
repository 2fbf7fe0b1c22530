import type { Principal } from '../auth/principal.js';
import type { OrganisationRow } from '../../domains/organisations/repository.js';
import type { ProjectRow } from '../../domains/projects/repository.js';

/** Deployment-wide endpoints (the organisation list, the event catalogue): only the caller. */
export interface DeploymentScope {
  readonly level: 'deployment';
  readonly principal: Principal;
}

/** An organisation the caller can reach; commands take it instead of an id to look up again. */
export interface OrganisationScope {
  readonly level: 'organisation';
  readonly principal: Principal;
  readonly organisationId: number;
  readonly organisation: OrganisationRow;
}

/** A live project of a live organisation the caller can reach. */
export interface ProjectScope {
  readonly level: 'project';
  readonly principal: Principal;
  readonly organisationId: number;
  readonly projectId: number;
  readonly project: ProjectRow;
}

export type TenantScope = DeploymentScope | OrganisationScope | ProjectScope;

/**
 * Where an endpoint's tenant comes from. `organisation`: the path's `:id`; a soft-deleted one is
 * hidden unless `deleted` says otherwise. `project`: the path's `:projectId`, or (`from: 'query'`,
 * the membership endpoints) a project token's own project or the one `?projectId` names.
 */
export type TenantRule =
  | { readonly level: 'deployment' }
  | { readonly level: 'organisation'; readonly deleted?: 'shown' | 'shownToOperator' }
  | { readonly level: 'project'; readonly from?: 'path' | 'query' };

/** The scope a handler receives, typed from its endpoint's rule. */
export type ScopeOf<R extends TenantRule> = R extends { level: 'project' }
  ? ProjectScope
  : R extends { level: 'organisation' }
    ? OrganisationScope
    : DeploymentScope;
