import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type Router from '@koa/router';
import type { AppContext, AppMiddleware, AppState } from '../../platform/http/context.js';
import { DependencyUnavailableError, NotFoundError, UnauthorizedError, ValidationError } from '../../platform/http/errors.js';
import { readBody } from '../../platform/http/body.js';
import { hashSecret } from '../../platform/crypto/secrets.js';
import { principalKey, tenantOfPrincipal, type Principal } from '../../access/auth/principal.js';
import type { TokenResolver } from '../../access/auth/authenticate.js';
import { csrfOf, requireCsrf, type ConsoleSessions, type SessionAudit } from '../../access/auth/session.js';
import { asTenant } from '../../platform/db/share.js';
import { recordAudit } from '../../domains/audit/record.js';
import { permissions, refusal, type Action } from '../../access/tenancy/policy.js';
import type { AuthFailureGuard } from '../../platform/ratelimit/auth-failures.js';

/** Where `npm run build` puts the console's bundle (console/build.mjs): dist/console, beside dist/src. */
const BUILT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'console');

const TYPES: Record<string, string> = { '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };

/** No inline script or style, nothing from another origin; the console talks to its own API only. */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Custody console</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/console/assets/app.css">
<script type="module" src="/console/assets/app.js"></script>
</head>
<body>
<div id="app"></div>
<noscript>The console needs JavaScript.</noscript>
</body>
</html>
`;

/** The built files, read once at start: only they are served (an unknown name is 404). */
function loadAssets(dir: string): Map<string, { body: Buffer; type: string }> {
  const assets = new Map<string, { body: Buffer; type: string }>();
  if (!existsSync(dir)) return assets;
  for (const name of readdirSync(dir)) {
    const type = TYPES[name.slice(name.lastIndexOf('.'))];
    if (type) assets.set(name, { body: readFileSync(join(dir, name)), type });
  }
  return assets;
}

const pageHeaders = (ctx: AppContext): void => {
  ctx.set('Content-Security-Policy', CONSOLE_CSP);
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.set('X-Frame-Options', 'DENY');
};

/**
 * What the console is told of its caller: who it is, and the actions of the one policy table
 * (access/tenancy/policy.ts) it may take, so it shows only the controls the token may use.
 */
const presentPrincipal = (p: Principal): Record<string, unknown> => ({
  ...(p.scope === 'operator'
    ? { scope: 'operator', role: 'admin' }
    : { scope: p.scope, role: p.role, tokenId: p.tokenId, organisationId: p.organisationId, ...(p.scope === 'project' ? { projectId: p.projectId } : {}) }),
  may: (Object.keys(permissions) as Action[]).filter((a) => refusal(p, a) === undefined),
});

const auditOf =
  (p: Principal, action: string, ctx: AppContext): SessionAudit =>
  (trx) =>
    recordAudit(trx, {
      organisation_id: p.scope === 'operator' ? null : p.organisationId,
      project_id: p.scope === 'project' ? p.projectId : null,
      actor: principalKey(p),
      action,
      target: null,
      status: null,
      request_id: ctx.state.requestId,
      details: {},
    });

const TOKEN = /^[\x21-\x7e]{1,512}$/;

export interface ConsoleDeps {
  sessions: ConsoleSessions;
  resolve: TokenResolver;
  authFailures: AuthFailureGuard;
  /** The token's rate limit, as every API request of that token counts (the operator's is not limited). */
  limit: (ctx: AppContext, principal: Principal) => void;
  /** Set the cookie `Secure` (the service is reached over https: PUBLIC_BASE_URL). */
  secureCookie: boolean;
  ttlS: number;
  /** The bundle's directory (tests may point elsewhere). */
  dir?: string;
}

/**
 * The operator console (docs/console.md): its page and bundle, and its session endpoints. The
 * page's scripts call the API's own endpoints with the session cookie, so the console can do
 * exactly what the token it was opened with can.
 */
export function mountConsole(router: Router<AppState>, deps: ConsoleDeps): void {
  const assets = loadAssets(deps.dir ?? BUILT);
  // `value` null clears it. Behind a proxy that ends TLS the connection is plain HTTP: the cookie module is told it is secure.
  const cookie = (ctx: AppContext, value: string | null): void => {
    const secure = deps.secureCookie || ctx.secure;
    ctx.cookies.secure = secure;
    ctx.cookies.set(deps.sessions.cookie, value, {
      httpOnly: true,
      sameSite: 'strict',
      secure,
      path: '/',
      overwrite: true,
      ...(value ? { maxAge: deps.ttlS * 1000 } : {}),
    });
  };

  const page: AppMiddleware = (ctx) => {
    if (!assets.has('app.js')) throw new DependencyUnavailableError('console bundle (npm run build)', 60);
    pageHeaders(ctx);
    ctx.set('Cache-Control', 'no-cache');
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = PAGE;
    return Promise.resolve();
  };
  router.get('/console', page);
  router.get('/console/', page);
  router.get('/console/assets/:file', (ctx) => {
    const file = assets.get(ctx.params['file'] ?? '');
    if (!file) throw new NotFoundError();
    pageHeaders(ctx);
    ctx.set('Cache-Control', 'no-cache');
    ctx.type = file.type;
    ctx.body = file.body;
  });

  // Sign-in: the token is read from the body, checked like a bearer token, and never stored; the cookie stands for it.
  router.post('/console/session', async (ctx) => {
    deps.authFailures.before(ctx);
    await readBody(ctx, 4096);
    const body = ctx.request.body as Record<string, unknown> | undefined;
    const token = body?.['token'];
    if (typeof token !== 'string' || !TOKEN.test(token) || Object.keys(body ?? {}).length !== 1)
      throw new ValidationError('The body is { "token": "<API token>" }.', [{ in: 'body', path: '/token', message: 'must be an API token' }]);
    const hash = hashSecret(token);
    const found = await deps.resolve(hash, null);
    if (!found) {
      deps.authFailures.failed(ctx);
      throw new UnauthorizedError('The API token is unknown or revoked.');
    }
    const { principal } = found;
    deps.limit(ctx, principal);
    const previous = deps.sessions.secretOf(ctx);
    const { secret, expiresAt } = await asTenant(tenantOfPrincipal(principal), () =>
      deps.sessions.start(hash, auditOf(principal, 'console.signed_in', ctx), previous),
    );
    cookie(ctx, secret.toString('base64url'));
    ctx.set('Cache-Control', 'no-store');
    ctx.status = 201;
    ctx.body = { principal: presentPrincipal(principal), csrfToken: csrfOf(secret), expiresAt: expiresAt.toISOString() };
  });

  // The console after a reload: who it is, and the CSRF token its writes carry (readable by this origin's scripts only).
  router.get('/console/session', async (ctx) => {
    const { secret, principal, expiresAt } = await liveSession(ctx, deps);
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { principal: presentPrincipal(principal), csrfToken: csrfOf(secret), expiresAt: expiresAt.toISOString() };
  });

  router.delete('/console/session', async (ctx) => {
    const { secret, principal } = await liveSession(ctx, deps);
    await asTenant(tenantOfPrincipal(principal), () => deps.sessions.end(secret, auditOf(principal, 'console.signed_out', ctx)));
    cookie(ctx, null);
    ctx.status = 204;
  });
}

/** The request's live session and its token's principal; an unknown cookie counts as a failed authentication, as an unknown token does. */
async function liveSession(ctx: AppContext, deps: ConsoleDeps): Promise<{ secret: Buffer; principal: Principal; expiresAt: Date }> {
  deps.authFailures.before(ctx);
  const secret = deps.sessions.secretOf(ctx);
  if (!secret) throw new UnauthorizedError('No console session: sign in with an API token.');
  requireCsrf(ctx, secret);
  const session = await deps.sessions.find(secret);
  const found = session && (await deps.resolve(session.tokenHash, null));
  if (!session || !found) {
    deps.authFailures.failed(ctx);
    throw new UnauthorizedError('The console session is unknown, expired or ended: sign in again.');
  }
  deps.limit(ctx, found.principal);
  return { secret, principal: found.principal, expiresAt: session.expiresAt };
}
