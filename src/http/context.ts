import type { RouterContext, RouterMiddleware } from '@koa/router';
import type { Principal } from '../auth/principal.js';
import type { Executor } from '../db/knex.js';
import type { Logger } from '../logger.js';
import type { TenantScope } from '../tenancy/scope.js';
import type { ProjectRow } from '../projects/repository.js';

export interface AppState {
  requestId: string;
  log: Logger;
  /** Set by `authenticate`. */
  principal?: Principal;
  /** Set by a user endpoint's authentication: the user, as idempotency records are scoped (`user:<projectId>:<email>`). */
  userKey?: string;
  /** The project the request names, as `authenticate` read it with the token (null: not reached by it). */
  namedProject?: { readonly id: number; readonly row: ProjectRow | null };
  /** Set when an API-token endpoint has resolved the tenant it acts on (tenancy/resolve.ts). */
  scope?: TenantScope;
  /**
   * Where this request's commands run: the pool, or the transaction the idempotency middleware
   * opened so that the stored answer commits together with the change.
   */
  db: Executor;
}

export type AppContext = RouterContext<AppState>;
export type AppMiddleware = RouterMiddleware<AppState>;
