import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { getAddress } from 'ethers';
import pg from 'pg';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../src/db/embedded.js';
import { createLogger } from '../src/logger.js';
import { Client } from './helpers/http.js';
import { freePort, spawnService, type Service } from './helpers/process.js';

const address = () => getAddress(`0x${randomBytes(20).toString('hex')}`);

/**
 * Faults under load, on throwaway instances of their own (never the machine's PostgreSQL): the
 * service runs as a process against an embedded PostgreSQL cluster that this test stops and
 * starts again while this process keeps issuing memberships.
 */
describe('faults under load: PostgreSQL restarted mid-load', function () {
  this.timeout(240_000);
  let dir: string;
  let port: number;
  let database: EmbeddedDatabase | undefined;
  let service: Service | undefined;
  const log = createLogger('silent');

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'custody-faults-'));
    chmodSync(dir, 0o755);
    port = await freePort();
    database = await startEmbeddedPostgres(dir, port, log);
  });

  after(async () => {
    service?.proc.kill('SIGKILL');
    await service?.exited;
    await database?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers 503 with Retry-After while the database is down, recovers by itself, and loses no committed change', async () => {
    const operatorToken = `op_${randomBytes(24).toString('hex')}`;
    const apiPort = await freePort();
    service = spawnService({
      ROLE: 'all',
      DATABASE_URL: database?.url ?? '',
      DATA_DIR: path.join(dir, 'service'),
      PORT: String(apiPort),
      OPERATOR_TOKEN: operatorToken,
      RATE_LIMIT_TOKEN: '0',
    });
    await service.waitFor(/listening on http/, 60_000);
    const operator = new Client(`http://127.0.0.1:${apiPort}`, operatorToken);
    const org = await operator.post('/api/v1/organisations', { name: 'Faults' });
    const project = await operator.post(`/api/v1/organisations/${org.body.id}/projects`, { name: 'p', issuer: 'https://idp.example.com' });
    const token = await operator.post(`/api/v1/organisations/${org.body.id}/tokens`, { name: 'load', role: 'admin', projectId: project.body.id });
    const client = operator.withToken(token.body.token);

    // The load: four clients issuing one membership per call, without pause, until told to stop.
    const committed: string[] = [];
    const statuses = new Map<number, number>();
    let unavailable = 0;
    let withoutRetryAfter = 0;
    let stop = false;
    const loop = async () => {
      while (!stop) {
        let res;
        try {
          res = await client.post('/api/v1/membership/issue', [{ membershipType: 'load:one', walletAddress: address() }]);
        } catch {
          continue; // a connection cut by the restart is not an answer
        }
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status === 201) committed.push(res.body.memberships[0].tokenId as string);
        if (res.status === 503) {
          unavailable++;
          if (!res.headers.get('retry-after')) withoutRetryAfter++;
        }
      }
    };
    const load = [loop(), loop(), loop(), loop()];
    const until = async (what: string, probe: () => boolean, timeoutMs = 60_000) => {
      const deadline = Date.now() + timeoutMs;
      while (!probe()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };

    await until('changes committed under load', () => committed.length >= 50);
    await database?.stop();
    await until('503 answers while the database is down', () => unavailable >= 5, 30_000);
    const beforeRestart = committed.length;
    database = await startEmbeddedPostgres(dir, port, log);
    await until('changes committed again after the restart', () => committed.length >= beforeRestart + 50, 60_000);
    stop = true;
    await Promise.all(load);

    const unhandled = (service.output().match(/.*unhandled error.*/g) ?? []).slice(0, 3).join('\n');
    expect([...statuses.keys()].sort(), `${JSON.stringify([...statuses])}\n${unhandled}`).to.deep.equal([201, 503]);
    expect(withoutRetryAfter).to.equal(0);
    // Every change the service answered 201 for is there, with its ledger transaction and its events.
    const sql = new pg.Client({ connectionString: database.url });
    await sql.connect();
    try {
      const ids = committed.map(Number);
      const { rows: found } = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM memberships WHERE id = ANY($1::bigint[])', [ids]);
      expect(found[0]?.n).to.equal(ids.length);
      const { rows: ledger } = await sql.query<{ n: number }>(`SELECT count(DISTINCT token_id)::int AS n FROM membership_transactions WHERE type = 'mint' AND token_id = ANY($1::bigint[])`, [ids]);
      expect(ledger[0]?.n).to.equal(ids.length);
      const { rows: events } = await sql.query<{ n: number }>(
        `SELECT count(DISTINCT e->'data'->>'tokenId')::int AS n FROM outbox o CROSS JOIN LATERAL json_array_elements(o.payload::json) e
          WHERE o.kind = 'event' AND e->>'type' = 'membership.issued' AND (e->'data'->>'tokenId') = ANY($1::text[])`,
        [committed],
      );
      expect(events[0]?.n).to.equal(ids.length);
    } finally {
      await sql.end();
    }
    // And the service is ready again without a restart of its own.
    expect((await fetch(`http://127.0.0.1:${apiPort}/readyz`)).status).to.equal(200);
  });
});
