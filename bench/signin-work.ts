import { createHash } from 'node:crypto';
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from 'jose';
import pg from 'pg';

/**
 * What the bare and Koa-only sign-in servers do per request, from their environment (DATABASE_URL,
 * JWKS, ISSUER, AUDIENCE): one RS256 verification against the issuer's keys, one prepared lookup
 * on a pool of 10 (the service's default), the answer. `name` names the prepared statement.
 */
export function signinWork(name: string): (key: string, authorization: string) => Promise<{ status: number; body: string }> {
  const { DATABASE_URL, JWKS, ISSUER, AUDIENCE } = process.env;
  const keys = createLocalJWKSet(JSON.parse(JWKS ?? '{}') as JSONWebKeySet);
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });
  return async (key, authorization) => {
    try {
      const { payload } = await jwtVerify(authorization.slice(7), keys, { algorithms: ['RS256'], issuer: ISSUER ?? '', audience: AUDIENCE ?? '' });
      // A named (prepared) statement, as the service's own lookup is: planned once per connection.
      const { rows } = await pool.query({
        name,
        text: `SELECT w.id, w.address, w.email, w.created_at FROM wallets w JOIN project_keys k ON k.project_id = w.project_id
                WHERE k.key_hash = $1 AND w.email_lower = $2`,
        values: [createHash('sha256').update(key).digest(), String(payload['email']).toLowerCase()],
      });
      const w = rows[0] as { id: number; address: string; email: string; created_at: Date } | undefined;
      return w
        ? { status: 200, body: JSON.stringify({ walletId: w.id, walletAddress: w.address, emailAddress: w.email, createdAt: w.created_at, isNew: false }) }
        : { status: 404, body: '{}' };
    } catch {
      return { status: 401, body: '' };
    }
  };
}
