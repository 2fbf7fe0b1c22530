import { createHash } from 'node:crypto';
import Router from '@koa/router';
import Koa from 'koa';
import { koaBody } from 'koa-body';
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from 'jose';
import pg from 'pg';

/**
 * The bare server's work (bare-signin-server.ts) behind the service's framework and nothing else:
 * Koa, one @koa/router route, koa-body's JSON parser. What the framework alone costs, beside the
 * bare server and the service in the same run (context for the sign-in ratio, not a goal).
 */
const { DATABASE_URL, PORT, JWKS, ISSUER, AUDIENCE } = process.env;
const keys = createLocalJWKSet(JSON.parse(JWKS ?? '{}') as JSONWebKeySet);
const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });

const app = new Koa();
const router = new Router();
router.post('/api/v1/signin', async (ctx) => {
  const body = ctx.request.body as { key: string };
  try {
    const token = (ctx.get('Authorization') ?? '').slice(7);
    const { payload } = await jwtVerify(token, keys, { algorithms: ['RS256'], issuer: ISSUER ?? '', audience: AUDIENCE ?? '' });
    const { rows } = await pool.query({
      name: 'koa_signin',
      text: `SELECT w.id, w.address, w.email, w.created_at FROM wallets w JOIN project_keys k ON k.project_id = w.project_id
              WHERE k.key_hash = $1 AND w.email_lower = $2`,
      values: [createHash('sha256').update(body.key).digest(), String(payload['email']).toLowerCase()],
    });
    const w = rows[0] as { id: number; address: string; email: string; created_at: Date } | undefined;
    ctx.status = w ? 200 : 404;
    ctx.body = w ? { walletId: w.id, walletAddress: w.address, emailAddress: w.email, createdAt: w.created_at, isNew: false } : {};
  } catch {
    ctx.status = 401;
  }
});
app.use(koaBody({ json: true, jsonStrict: true, multipart: false, urlencoded: false, text: false }));
app.use(router.routes());
app.listen(Number(PORT), '127.0.0.1', () => process.stdout.write('koa server listening\n'));

process.on('SIGTERM', () => process.exit(0));
