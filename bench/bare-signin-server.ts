import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from 'jose';
import pg from 'pg';

/**
 * The ceiling for sign-in: a bare node:http server doing the same per-request work as an
 * existing user's sign-in (parse the body, one RS256 verification against the issuer's keys,
 * one database lookup), with nothing else: no framework, no validation, no logging.
 */
const { DATABASE_URL, PORT, JWKS, ISSUER, AUDIENCE } = process.env;
const keys = createLocalJWKSet(JSON.parse(JWKS ?? '{}') as JSONWebKeySet);
const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });

createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    void (async () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { key: string };
        const token = (req.headers.authorization ?? '').slice(7);
        const { payload } = await jwtVerify(token, keys, { algorithms: ['RS256'], issuer: ISSUER ?? '', audience: AUDIENCE ?? '' });
        // A named (prepared) statement, as the service's own lookup is: planned once per connection.
        const { rows } = await pool.query({
          name: 'bare_signin',
          text: `SELECT w.id, w.address, w.email, w.created_at FROM wallets w JOIN project_keys k ON k.project_id = w.project_id
                  WHERE k.key_hash = $1 AND w.email_lower = $2`,
          values: [createHash('sha256').update(body.key).digest(), String(payload['email']).toLowerCase()],
        });
        const w = rows[0] as { id: number; address: string; email: string; created_at: Date } | undefined;
        res.writeHead(w ? 200 : 404, { 'content-type': 'application/json' });
        res.end(JSON.stringify(w ? { walletId: w.id, walletAddress: w.address, emailAddress: w.email, createdAt: w.created_at, isNew: false } : {}));
      } catch {
        res.writeHead(401).end();
      }
    })();
  });
}).listen(Number(PORT), '127.0.0.1', () => process.stdout.write('bare server listening\n'));

// A normal exit on SIGTERM (so that --cpu-prof, when given, writes its profile).
process.on('SIGTERM', () => process.exit(0));
