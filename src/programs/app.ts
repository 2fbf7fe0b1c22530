import { systemClock } from '../platform/runtime/clock.js';
import Router from '@koa/router';
import Koa from 'koa';
import type { Knex } from 'knex';
import { authenticate, tokenResolver } from '../access/auth/authenticate.js';
import { principalOf } from '../access/auth/access.js';
import { principalKey, tenantOfPrincipal, type Principal } from '../access/auth/principal.js';
import { asTenant } from '../platform/db/share.js';
import { PgRateLimitStore, RateLimiter, type RateLimitStore } from '../platform/ratelimit/limiter.js';
import { AuthFailureGuard } from '../platform/ratelimit/auth-failures.js';
import type { Config } from '../platform/config/config.js';
import { Cursors } from '../platform/http/pagination.js';
import { SecretBox } from '../platform/crypto/secrets.js';
import { MethodNotAllowedError, NotFoundError } from '../platform/http/errors.js';
import { base } from '../platform/http/base-middleware.js';
import type { AppContext, AppState } from '../platform/http/context.js';
import { idempotency } from '../access/endpoints/idempotency.js';
import type { RouteDeps } from '../access/endpoints/route-deps.js';
import { audited } from '../domains/audit/middleware.js';
import type { Lifecycle } from '../platform/runtime/lifecycle.js';
import type { Logger } from '../platform/logging/logger.js';
import type { SignerClient } from '../platform/signer/client.js';
import { OidcVerifier } from '../access/auth/oidc.js';
import type { ProjectKeyCache } from '../access/tenancy/key-cache.js';
import { mount, type Declaration } from '../access/endpoints/declare.js';
import { healthEndpoints } from './endpoints/health.js';
import { openApiEndpoints } from './endpoints/reference.js';
import { mountConsole } from './console/console.js';
import { ConsoleSessions, SECURE_SESSION_COOKIE, SESSION_COOKIE } from '../access/auth/session.js';
import { DOMAINS } from '../domains/index.js';
import type { EndpointDeps } from '../domains/domain.js';
import { UserAuthenticator } from '../access/auth/user.js';
import { DevIdp, DEV_ISSUER } from '../access/auth/dev-idp.js';
import { serviceVersion } from '../platform/config/version.js';
import { WarnOncePer } from '../platform/logging/once.js';

export interface AppDeps {
  config: Config;
  db: Knex;
  log: Logger;
  /** SHA-256 of the operator token; the token itself is not kept. */
  operatorTokenHash: Buffer;
  dataEncryptionKey: Buffer;
  lifecycle: Lifecycle;
  signer: SignerClient;
  /** Where rate-limit hits are counted; default: this database. */
  rateLimitStore?: RateLimitStore;
  /** The service version the OpenAPI document states. */
  version?: string;
  /** Injectable clock (ms): JWT expiry checks, membership expiry. */
  now?: () => number;
  /** The project-key cache sign-in reads through (started by the caller); none: every look-up asks the database. */
  projectCache?: ProjectKeyCache;
}

/** Every endpoint each app mounted, in mount order. */
const declaredBy = new WeakMap<Koa<AppState>, readonly Declaration[]>();
export const mountedEndpoints = (app: Koa<AppState>): readonly Declaration[] => declaredBy.get(app) ?? [];
/** The API endpoints each app declared (not the plain ones: probes, metrics, reference), for the registry's tests. */
export const declaredEndpoints = (app: Koa<AppState>): readonly Declaration[] => mountedEndpoints(app).filter((d) => !d.plain);

/** The Koa app with its middleware in one list, in order. No listen(): main.ts and tests do that. */
export function buildApp(deps: AppDeps): Koa<AppState> {
  const app = new Koa<AppState>({ proxy: false });
  const router = new Router<AppState>();
  const limiter = new RateLimiter(
    deps.rateLimitStore ?? new PgRateLimitStore(deps.db),
    deps.config.rateLimitWindowS,
    deps.log,
    deps.now,
    deps.config.rateLimitFlushMs,
  );
  // Guessing bound: failed authentications (unknown API token or project key) per client address.
  const authFailures = new AuthFailureGuard(limiter, deps.config.rateLimitAuthFailures, deps.config.rateLimitWindowS);
  const resolveToken = tokenResolver(deps.db, deps.operatorTokenHash);
  // A token's rate limit, for its API requests and its console sessions alike (the operator's own token is not limited).
  const limitToken = (ctx: AppContext, principal: Principal): void => {
    if (principal.scope !== 'operator') limiter.enforce(ctx, principalKey(principal), deps.config.rateLimitToken);
  };
  // The console's cookie stands for a token beside the bearer header (off with CONSOLE_ENABLED=false).
  const secureCookie = deps.config.publicBaseUrl.startsWith('https://');
  const sessions = deps.config.consoleEnabled
    ? new ConsoleSessions(deps.db, deps.config.consoleSessionTtlS, deps.now ?? systemClock, secureCookie ? SECURE_SESSION_COOKIE : SESSION_COOKIE)
    : undefined;
  const identify = authenticate(resolveToken, sessions);
  const secretBox = new SecretBox(deps.dataEncryptionKey, deps.config.dataDecryptionKeys);
  const routeDeps: RouteDeps = {
    config: deps.config,
    // Every API-token route: who is calling, then that token's rate limit (the operator's own
    // token, the deployment's administrator, is not limited).
    authenticate: async (ctx, next) => {
      authFailures.before(ctx);
      await authFailures.watch(ctx, async () => {
        await identify(ctx, async () => {
          const principal = principalOf(ctx);
          limitToken(ctx, principal);
          await asTenant(tenantOfPrincipal(principal), next);
        });
      });
    },
    idempotent: idempotency(deps.db, { ttlS: deps.config.idempotencyTtlS, leaseS: deps.config.idempotencyLeaseS }, secretBox),
    audited,
    // Cursor MACs use a key derived from, never equal to, the data encryption key.
    cursors: new Cursors(secretBox.cursorKeys()),
    secretBox,
    now: deps.now ?? systemClock,
    // First on every route that changes organisations, projects or keys: once the request is over
    // (its transactions committed or rolled back), this process's project-key cache is dropped, so
    // the caller's next request sees the change; other processes hear of it by NOTIFY.
    projectChange: async (_ctx, next) => {
      try {
        await next();
      } finally {
        deps.projectCache?.changed();
      }
    },
  };

  const devIdp = deps.config.devIdp ? new DevIdp(deps.db, secretBox) : undefined;
  // Made or read at start, outside any request; a failure here is tried again at first use.
  devIdp?.key().catch(() => undefined);
  const oidc = new OidcVerifier({
    audience: deps.config.serviceAudience,
    clockToleranceS: deps.config.jwtClockToleranceS,
    cacheTtlS: deps.config.jwksCacheTtlS,
    maxIssuers: 10_000,
    refetchIntervalMs: deps.config.jwksRefetchIntervalMs,
    fetchTimeoutMs: deps.config.oidcFetchTimeoutMs,
    egress: { allow: deps.config.egressAllowPrivate },
    extraCa: deps.config.oidcCa,
    failures: new WarnOncePer(deps.log),
    ...(deps.now ? { now: deps.now } : {}),
    ...(devIdp ? { local: { issuer: DEV_ISSUER, keySet: () => devIdp.keySet() } } : {}),
  });
  // The end user present (auth kind `userJwt`): the project by its key, the user by their JWT.
  const users = new UserAuthenticator({
    db: deps.db,
    oidc,
    env: deps.config.appEnv,
    ...(deps.projectCache ? { projectCache: deps.projectCache } : {}),
    // Counted once the project key is known, before the JWT is verified (0: not limited).
    ...(deps.config.rateLimitProject > 0 ? { beforeJwt: (ctx, project) => limiter.enforce(ctx, `project:${project.id}`, deps.config.rateLimitProject) } : {}),
    authFailures,
  });
  const endpointDeps: EndpointDeps = {
    ...routeDeps,
    db: deps.db,
    log: deps.log,
    signer: deps.signer,
    oidc,
    env: deps.config.appEnv,
    ...(devIdp ? { devIdp } : {}),
  };
  // Every endpoint, declared once (access/endpoints/declare.ts): its middlewares follow from the declaration.
  const endpoints: Declaration[] = [
    ...healthEndpoints(deps.db, deps.signer, deps.lifecycle, deps.config.appEnv),
    ...DOMAINS.flatMap((domain) => domain.endpoints?.(endpointDeps) ?? []),
  ];
  // Last: the document describes every endpoint, and itself.
  endpoints.push(...openApiEndpoints({ version: deps.version ?? serviceVersion(), env: deps.config.appEnv }, () => endpoints));
  mount(router, { ...routeDeps, users }, endpoints);
  if (sessions)
    mountConsole(router, {
      sessions,
      resolve: resolveToken,
      authFailures,
      limit: limitToken,
      secureCookie,
      ttlS: deps.config.consoleSessionTtlS,
    });
  declaredBy.set(app, endpoints);

  // No body parser here: an endpoint reads its body itself, after routing and its auth (platform/http/body.ts).
  const middleware: Array<Koa.Middleware<AppState>> = [
    base(deps.log, deps.db),
    router.routes() as Koa.Middleware<AppState>,
    // Nothing matched: 405 when the path exists with other methods, else 404.
    (ctx) => {
      const allowed = [...new Set(router.match(ctx.path, ctx.method).path.flatMap((layer) => layer.methods))];
      if (allowed.length > 0 && ctx.method === 'OPTIONS') {
        ctx.set('Allow', [...allowed, 'OPTIONS'].join(', '));
        ctx.status = 204;
        return;
      }
      if (allowed.length > 0) throw new MethodNotAllowedError(allowed);
      throw new NotFoundError(`No route for ${ctx.method} ${ctx.path}.`);
    },
  ];
  for (const m of middleware) app.use(m);
  app.on('error', (err: unknown) => deps.log.error({ err: err instanceof Error ? err.message : String(err) }, 'koa error'));
  return app;
}
