import type { RouterContext, RouterMiddleware } from '@koa/router';
import type { Principal } from '../../access/auth/principal.js';
import type { UserCaller } from '../../access/auth/user.js';
import type { Executor } from '../db/knex.js';
import type { Logger } from '../logging/logger.js';
import type { TenantScope } from '../../access/tenancy/scope.js';
import type { ProjectRow } from '../../domains/projects/repository.js';

export interface AppState {
  requestId: string;
  log: Logger;
  /** Set by `authenticate`. */
  principal?: Principal;
  /** Set by a user endpoint that authenticates before its body is validated (access/endpoints/declare.ts). */
  user?: UserCaller;
  /** Set by a user endpoint's authentication: the user, as idempotency records are scoped (`user:<projectId>:<email>`). */
  userKey?: string;
  /** The project the request names, as `authenticate` read it with the token (null: not reached by it). */
  namedProject?: { readonly id: number; readonly row: ProjectRow | null };
  /** Set when an API-token endpoint has resolved the tenant it acts on (access/tenancy/resolve.ts). */
  scope?: TenantScope;
  /**
   * Where this request's commands run: the pool, or the transaction of the change that the audit
   * middleware opened (which then holds the request's only connection: nothing in it may use the pool).
   */
  db: Executor;
  /**
   * Set by the idempotency middleware while the request holds its Idempotency-Key record: stores
   * the answer in `tx`. The audit middleware calls it in the change's transaction, so that the
   * change and its stored answer commit together (access/endpoints/idempotency.ts).
   */
  idempotentAnswer?: { storeIn(tx: Executor): Promise<void> } | undefined;
}

export type AppContext = RouterContext<AppState>;
export type AppMiddleware = RouterMiddleware<AppState>;
