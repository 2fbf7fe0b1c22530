import type Router from '@koa/router';
import type { AppContext, AppMiddleware, AppState } from '../../platform/http/context.js';
import type { Cursors, Page, PageOf } from '../../platform/http/pagination.js';
import type { RouteDeps } from './route-deps.js';
import { endpoint, type Input, type Schemas } from '../../platform/http/validate.js';
import { DEFAULT_BODY_LIMIT, readBody } from '../../platform/http/body.js';
import { principalOf } from '../auth/access.js';
import { tenantOf } from '../auth/principal.js';
import { asTenant } from '../../platform/db/share.js';
import type { Action } from '../tenancy/policy.js';
import { resolveScope } from '../tenancy/resolve.js';
import type { ScopeOf, TenantRule, TenantScope } from '../tenancy/scope.js';
import { projectKeyIn, userKey, type UserAuthenticator, type UserAuthRule, type UserCaller } from '../auth/user.js';
import type { OperationDoc } from '../../platform/openapi/meta.js';

/** How a caller proves who it is: nothing, an API token, or a user's JWT with a project key (access/auth/user.ts). */
export type AuthKind = 'none' | 'apiToken' | 'userJwt';

/** What a change needs around it. Every write is audited in the transaction of the change. */
export interface WritePolicy {
  /** `Idempotency-Key` honoured (docs/interface.md section 2b: every management POST). */
  readonly idempotent: boolean;
  /**
   * Who writes the audit entry: `request` (the default: the request's own entry, in its
   * transaction) or `command` (the wallet endpoints: the command records each key it creates,
   * `wallet.key_created`, since a sign-in of a known user changes nothing; and each signing
   * decision, a denial too, in a transaction of its own).
   */
  readonly audit?: 'request' | 'command';
  /**
   * What the audit entry names as the target: a field of the answer (what a create made), a path
   * parameter (what a change or delete touched), or nothing (`none`, for writes on the tenant itself).
   * Required when the request writes the entry.
   */
  readonly target?: AuditTarget;
  /** Changes organisations, projects or keys: the project-key cache is dropped when the request is over. */
  readonly invalidatesProjectKeys?: boolean;
}

/** `{ answer: 'id', organisation: true }`: the answer is a new organisation, which is also the entry's tenant. */
export type AuditTarget = { readonly answer: 'id' | 'tokenId'; readonly organisation?: true } | { readonly param: string } | 'none';

interface RouteBase {
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  readonly path: string;
  /** Absent on reads. */
  readonly write?: WritePolicy;
  /** A POST that changes nothing (a diagnostic): said on purpose, so that no write goes unaudited by accident. */
  readonly readOnly?: true;
  /** A cursor-paged list (`declareList`): its query has `cursor` and `limit`. */
  readonly list?: true;
}

/**
 * An endpoint's route. API-token endpoints name the tenant they act on and the action of the
 * table in access/tenancy/policy.ts; the scope is resolved before the handler, which receives it typed.
 */
export type Route = RouteBase &
  (
    | { readonly auth: 'none' }
    | { readonly auth: 'userJwt'; readonly user: UserAuthRule }
    | { readonly auth: 'apiToken'; readonly may: Action; readonly tenant: TenantRule }
  );

/** The scope a handler of this route receives (none for the endpoints without an API token). */
export type ScopeFor<R extends Route> = R extends { tenant: infer T extends TenantRule } ? ScopeOf<T> : undefined;
/** The user a handler of a user endpoint receives, authenticated as its rule says. */
export type UserFor<R extends Route> = R extends { auth: 'userJwt' } ? UserCaller : undefined;

/** The head of an API-token route acting on the project of its path (`:projectId`) or, `from: 'query'`, of `?projectId=`. */
export function atProject<const A extends Action>(may: A, from?: 'query'): { auth: 'apiToken'; tenant: { level: 'project'; from?: 'query' }; may: A } {
  return { auth: 'apiToken', tenant: from ? { level: 'project', from } : { level: 'project' }, may };
}
/** The head of an API-token route acting on the organisation of its path (`:id`); `deleted` says whether a deleted one is found. */
export function atOrganisation<const A extends Action>(
  may: A,
  deleted?: 'shown' | 'shownToOperator',
): { auth: 'apiToken'; tenant: { level: 'organisation'; deleted?: 'shown' | 'shownToOperator' }; may: A } {
  return { auth: 'apiToken', tenant: deleted ? { level: 'organisation', deleted } : { level: 'organisation' }, may };
}
/** The head of an API-token route acting on the deployment (the operator's). */
export function atDeployment<const A extends Action>(may: A): { auth: 'apiToken'; tenant: { level: 'deployment' }; may: A } {
  return { auth: 'apiToken', tenant: { level: 'deployment' }, may };
}

/** What a list handler gets beside its input: the page asked for, and how to answer it. */
export interface Paging {
  readonly page: Page;
  /** `rows` fetched with `page.limit + 1`: the page, and the cursor of the next one. */
  pageOf<T extends { id: number }>(rows: T[]): PageOf<T>;
}

type Handler = (ctx: AppContext, input: Input<Schemas> & { paging?: Paging; scope?: TenantScope; user?: UserCaller }) => Promise<void>;

/** One endpoint: its route, auth and write policy, its schemas and OpenAPI text, its handler. */
export interface Declaration {
  readonly route: Route;
  readonly schemas: Schemas;
  readonly handler: Handler;
  /** A plain endpoint (health, metrics, the reference): no authentication or validation; its handler is the whole route. */
  readonly plain?: true;
}

/** Declares an endpoint; the handler's input is typed from the schemas it is validated against. */
export function declare<const R extends Route, S extends Schemas>(
  route: R,
  schemas: S,
  handler: (ctx: AppContext, input: Input<S> & { scope: ScopeFor<R>; user: UserFor<R> }) => Promise<void>,
): Declaration {
  const doc = schemas.doc ? { ...schemas.doc, security: route.auth } : undefined;
  return { route, schemas: { ...schemas, ...(doc ? { doc } : {}) }, handler: handler as Handler };
}

/**
 * Declares an endpoint without authentication or validation (liveness, readiness, metrics, the
 * reference page): what it answers is all in its handler; its doc says so (`plain`).
 */
export function declarePlain(route: { method: 'GET'; path: string }, doc: OperationDoc, handler: (ctx: AppContext) => Promise<void> | void): Declaration {
  return { route: { ...route, auth: 'none' }, schemas: { doc: { ...doc, plain: true } }, handler: async (ctx) => handler(ctx), plain: true };
}

/**
 * Declares a cursor-paged list. Its cursors are bound to the route, its path parameters and its
 * validated query (all but `cursor` and `limit`), so a cursor of one list is refused by another.
 */
export function declareList<const R extends Route, S extends Schemas>(
  route: R,
  schemas: S,
  handler: (ctx: AppContext, input: Input<S> & { scope: ScopeFor<R>; paging: Paging }) => Promise<void>,
): Declaration {
  return declare(
    { ...route, list: true },
    schemas,
    handler as unknown as (ctx: AppContext, input: Input<S> & { scope: ScopeFor<R>; user: UserFor<R> }) => Promise<void>,
  );
}

/** The list a cursor belongs to: the route and everything of the request that selects its rows. */
export function listKey(route: Route, params: Readonly<Record<string, unknown>>, query: Readonly<Record<string, unknown>>): string {
  const canonical = (o: Readonly<Record<string, unknown>>, leave: string[] = []) =>
    JSON.stringify(
      Object.entries(o)
        .filter(([k]) => !leave.includes(k))
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
    );
  return `${route.method} ${route.path} ${canonical(params)} ${canonical(query, ['cursor', 'limit'])}`;
}

function withPaging(route: Route, cursors: Cursors, handler: Handler): Handler {
  return (ctx, input) => {
    const query = (input.query ?? {}) as Record<string, unknown> & { cursor?: string; limit?: string };
    const list = listKey(route, ctx.params, query);
    const page = cursors.page(list, query);
    return handler(ctx, { ...input, paging: { page, pageOf: (rows) => cursors.result(list, page, rows) } });
  };
}

const bodyAt =
  (limit: number): AppMiddleware =>
  async (ctx, next) => {
    await readBody(ctx, limit);
    await next();
  };

/** Resolves the caller's tenant (404 outside its reach, 403 by the policy table) and hands it to the handler. */
function withScope(route: Route, handler: Handler): Handler {
  if (route.auth !== 'apiToken') return handler;
  return async (ctx, input) => {
    const naming = { params: ctx.params, query: (input.query ?? {}) as Record<string, unknown> };
    const scope = await resolveScope(ctx.state.db, principalOf(ctx), route.tenant, route.may, naming, ctx.state.namedProject);
    ctx.state.scope = scope;
    return handler(ctx, { ...input, scope });
  };
}

/**
 * `beforeBody`: what the headers can refuse is refused first (an address over its failures, no
 * bearer, not a JWT); then the body is read at the route's limit, measured before it is parsed,
 * and only its project key is looked at until the key and the JWT are verified. The idempotency
 * records that follow are the user's.
 */
function authenticateUserFirst(users: UserAuthenticator, limit: number): AppMiddleware {
  return async (ctx, next) => {
    users.requireBearer(ctx);
    await readBody(ctx, limit);
    const user = await users.identify({ key: projectKeyIn(ctx.request.body) }, ctx);
    ctx.state.user = user;
    ctx.state.userKey = userKey(user);
    await asTenant(tenantOf(user.project.organisation_id), next);
  };
}

/** Hands a user endpoint's handler its user: known already (`beforeBody`), or identified from the validated body. */
function withUser(route: Route, users: UserAuthenticator, handler: Handler): Handler {
  if (route.auth !== 'userJwt') return handler;
  const { user: rule } = route;
  return async (ctx, input) => {
    const known = ctx.state.user;
    const user =
      rule.verify === 'beforeBody' && known
        ? known
        : await users.identify(input.body ?? {}, ctx, {
            prefetchWallet: rule.verify === 'afterValidation' && rule.prefetchWallet === true,
          });
    return asTenant(tenantOf(user.project.organisation_id), () => handler(ctx, { ...input, user }));
  };
}

/**
 * Registers endpoints, each with the same middlewares in the one order every request follows:
 * cache invalidation (outermost, so it sees the committed outcome), authentication, idempotency
 * (the key's record reserved by a statement of its own), audit (the change's transaction, with
 * its entry and the stored answer), then body reading (after auth: platform/http/body.ts), validation, the
 * page asked for, the tenant scope (in the change's transaction), the user (when its rule is to
 * verify after validation) and the handler.
 */
export function mount(
  router: Router<AppState>,
  deps: Pick<RouteDeps, 'authenticate' | 'idempotent' | 'audited' | 'projectChange' | 'cursors'> & { users: UserAuthenticator },
  declarations: readonly Declaration[],
): void {
  for (const d of declarations) {
    const { route } = d;
    if (d.plain) {
      // Nothing is read for it: the handler gets no input.
      router.register(route.path, [route.method], [(ctx) => d.handler(ctx, { params: undefined, query: undefined, body: undefined })]);
      continue;
    }
    const chain: AppMiddleware[] = [];
    if (route.write?.invalidatesProjectKeys) chain.push(deps.projectChange);
    if (route.auth === 'apiToken') chain.push(deps.authenticate);
    else if (route.auth === 'userJwt' && route.user.verify === 'beforeBody')
      chain.push(authenticateUserFirst(deps.users, d.schemas.bodyLimit ?? DEFAULT_BODY_LIMIT));
    // The idempotency fingerprint covers the body: read first, at the route's own limit.
    if (route.write?.idempotent) chain.push(bodyAt(d.schemas.bodyLimit ?? DEFAULT_BODY_LIMIT), deps.idempotent);
    if (route.write && route.write.audit !== 'command') chain.push(deps.audited(route, route.write.target ?? 'none'));
    const scoped = withScope(route, withUser(route, deps.users, d.handler));
    chain.push(endpoint(d.schemas, route.list ? withPaging(route, deps.cursors, scoped) : scoped));
    router.register(route.path, [route.method], chain);
  }
}
