import type Router from '@koa/router';
import type { AppContext, AppMiddleware, AppState } from './context.js';
import type { RouteDeps } from './route-deps.js';
import { endpoint, type Input, type Schemas } from './validate.js';

/** How a caller proves who it is: nothing, an API token, or a user's JWT with a project key (checked by the wallet commands). */
export type AuthKind = 'none' | 'apiToken' | 'userJwt';

/** What a change needs around it. Every write is audited in the transaction of the change. */
export interface WritePolicy {
  /** `Idempotency-Key` honoured (CONTRACT.md section 2b: every management POST). */
  readonly idempotent: boolean;
  /**
   * Who writes the audit entry: `request` (the default: the request's own entry, in its
   * transaction) or `command` (the wallet endpoints: the command records each key it creates,
   * `wallet.key_created`, since a sign-in of a known user changes nothing).
   */
  readonly audit?: 'request' | 'command';
  /** Changes organisations, projects or keys: the project-key cache is dropped when the request is over. */
  readonly invalidatesProjectKeys?: boolean;
}

export interface Route {
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  readonly path: string;
  readonly auth: AuthKind;
  /** Absent on reads. */
  readonly write?: WritePolicy;
  /** A POST that changes nothing (a diagnostic): said on purpose, so that no write goes unaudited by accident. */
  readonly readOnly?: true;
}

/** One endpoint: its route, auth and write policy, its schemas and OpenAPI text, its handler. */
export interface Declaration {
  readonly route: Route;
  readonly schemas: Schemas;
  readonly middleware: AppMiddleware;
}

/** Declares an endpoint; the handler's input is typed from the schemas it is validated against. */
export function declare<S extends Schemas>(route: Route, schemas: S, handler: (ctx: AppContext, input: Input<S>) => Promise<void>): Declaration {
  const doc = schemas.doc ? { ...schemas.doc, security: route.auth } : undefined;
  const full = { ...schemas, ...(doc ? { doc } : {}) };
  return { route, schemas: full, middleware: endpoint(full, handler) };
}

/**
 * Registers endpoints, each with the same middlewares in the one order every request follows:
 * cache invalidation (outermost, so it sees the committed outcome), authentication, idempotency
 * (its transaction holds the stored answer), audit (a savepoint with the change and its entry),
 * then validation and body reading (after auth: http/body.ts) and the handler.
 */
export function mount(
  router: Router<AppState>,
  deps: Pick<RouteDeps, 'authenticate' | 'idempotent' | 'audited' | 'projectChange'>,
  declarations: readonly Declaration[],
): void {
  for (const d of declarations) {
    const { route } = d;
    const chain: AppMiddleware[] = [];
    if (route.write?.invalidatesProjectKeys) chain.push(deps.projectChange);
    if (route.auth === 'apiToken') chain.push(deps.authenticate);
    if (route.write?.idempotent) chain.push(deps.idempotent);
    if (route.write && route.write.audit !== 'command') chain.push(deps.audited);
    chain.push(d.middleware);
    router.register(route.path, [route.method], chain);
  }
}
