import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { getAddress } from 'ethers';
import pg from 'pg';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../src/platform/db/embedded.js';
import { createLogger } from '../src/platform/logging/logger.js';
import { Client, required } from './support/http.js';
import { freePort, spawnService, type Service } from './support/process.js';
import { startSigner, type RunningSigner } from './support/signer.js';
import { TestIdp } from './support/idp.js';
import { Receiver } from './support/receiver.js';
import { until } from './support/wait.js';
import { SignerClient } from '../src/platform/signer/client.js';
import { TEST_DEPLOYMENT } from './support/keys.js';

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
      EGRESS_ALLOW_PRIVATE: '127.0.0.0/8,::1/128',
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
        if (res.status === 201) committed.push(required(res.body.memberships[0]).tokenId);
        if (res.status === 503) {
          unavailable++;
          if (!res.headers.get('retry-after')) withoutRetryAfter++;
        }
      }
    };
    const load = [loop(), loop(), loop(), loop()];

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
      const { rows: ledger } = await sql.query<{ n: number }>(
        `SELECT count(DISTINCT token_id)::int AS n FROM membership_transactions WHERE type = 'mint' AND token_id = ANY($1::bigint[])`,
        [ids],
      );
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

describe('faults under load: the signer killed, the API killed', function () {
  this.timeout(300_000);
  // A throwaway PostgreSQL cluster of this suite's own, never the machine's.
  let clusterDir: string;
  let cluster: EmbeddedDatabase;
  before(async () => {
    clusterDir = mkdtempSync(path.join(tmpdir(), 'custody-faults-cluster-'));
    chmodSync(clusterDir, 0o755);
    cluster = await startEmbeddedPostgres(clusterDir, await freePort(), createLogger('silent'));
  });
  after(async () => {
    await cluster.stop();
    rmSync(clusterDir, { recursive: true, force: true });
  });

  /** A database of its own in that cluster. */
  async function freshDatabase(name: string): Promise<string> {
    const admin = new pg.Client({ connectionString: cluster.url });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE ${name}`);
    } finally {
      await admin.end();
    }
    const url = new URL(cluster.url);
    url.pathname = `/${name}`;
    return url.toString();
  }

  /** An HTTPS identity provider, a webhook receiver and a directory holding the IdP's CA. */
  async function surroundings() {
    const idp = await TestIdp.start();
    const receiver = await Receiver.start();
    const dir = mkdtempSync(path.join(tmpdir(), 'custody-faults-'));
    chmodSync(dir, 0o755);
    const caFile = path.join(dir, 'ca.pem');
    writeFileSync(caFile, idp.caPem);
    return {
      idp,
      receiver,
      dir,
      caFile,
      operatorToken: `op_${randomBytes(24).toString('hex')}`,
      teardown: async () => {
        await receiver.close();
        await idp.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }

  it('the signer killed mid-load: 503 with Retry-After meanwhile, then every answered wallet exists with the signer key', async () => {
    const stack = await surroundings();
    const databaseUrl = await freshDatabase('faults_signer');
    const signer = await startSigner();
    const signerPort = Number(new URL(signer.url).port);
    let restarted: RunningSigner | undefined;
    const migrate = spawnService({ ROLE: 'migrate', DATABASE_URL: databaseUrl });
    expect(await migrate.exited, migrate.output()).to.equal(0);
    const apiPort = await freePort();
    const api = spawnService({
      ROLE: 'api',
      DATABASE_URL: databaseUrl,
      EGRESS_ALLOW_PRIVATE: '127.0.0.0/8,::1/128',
      KEYVAULT_URL: signer.url,
      KEYVAULT_TOKEN: signer.token,
      KEYVAULT_TIMEOUT_MS: '2000',
      DATA_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      OPERATOR_TOKEN: stack.operatorToken,
      OIDC_CA_FILE: stack.caFile,
      RELAY_IN_API: 'true',
      RELAY_POLL_MS: '100',
      RATE_LIMIT_TOKEN: '0',
      RATE_LIMIT_PROJECT: '0',
      PORT: String(apiPort),
    });
    const db = new pg.Client({ connectionString: databaseUrl });
    try {
      await api.waitFor(/listening on http/);
      await db.connect();
      const operator = new Client(`http://127.0.0.1:${apiPort}`, stack.operatorToken);
      const iss = await stack.idp.issuer();
      const org = await operator.post('/api/v1/organisations', { name: 'Signer faults' });
      const project = await operator.post(`/api/v1/organisations/${org.body.id}/projects`, { name: 'p', issuer: iss.issuer });
      const key = project.body.projectKey;

      const signedIn = new Map<string, string>();
      const accepted: string[] = [];
      const statuses = new Map<number, number>();
      let withoutRetryAfter = 0;
      let stop = false;
      let n = 0;
      const loop = async () => {
        while (!stop) {
          const email = `user${n++}@faults.example.com`;
          const jwt = await iss.sign({ email }, { audience: 'urn:custody:testnet', expiresIn: '1h' });
          const path = n % 2 === 0 ? '/api/v1/signin' : '/api/v1/wallets/createasync';
          const res = await operator.withToken(jwt).post(path, { key });
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          if (res.status === 200) signedIn.set(email, required('walletAddress' in res.body ? res.body.walletAddress : undefined, 'the wallet'));
          if (res.status === 202) accepted.push(email);
          if (res.status === 503 && !res.headers.get('retry-after')) withoutRetryAfter++;
        }
      };
      const load = [loop(), loop(), loop(), loop()];
      await until('wallets under load', () => signedIn.size >= 20);
      signer.service.proc.kill('SIGKILL');
      await signer.service.exited;
      await until('503 while the signer is down', () => (statuses.get(503) ?? 0) >= 5, 60_000);
      const before = signedIn.size;
      restarted = await startSigner({}, { dataDir: signer.dataDir, token: signer.token, port: signerPort });
      await until('wallets again after the restart', () => signedIn.size >= before + 20, 60_000);
      stop = true;
      await Promise.all(load);

      expect(
        [...statuses.keys()].every((s) => [200, 202, 503].includes(s)),
        JSON.stringify([...statuses]),
      ).to.equal(true);
      expect(withoutRetryAfter).to.equal(0);
      // Every wallet answered is stored with that address, and the signer holds its key.
      const { rows } = await db.query<{ email: string; address: string | null; key_id: string | null }>('SELECT email, address, key_id FROM wallets');
      const byEmail = new Map(rows.map((r) => [r.email, r]));
      for (const [email, address] of signedIn) expect(byEmail.get(email)?.address, email).to.equal(address);
      // Every accepted createasync ends with a wallet, made by the relay once the signer is back.
      await until(
        'every accepted wallet created',
        async () => {
          const { rows: open } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM wallets WHERE email = ANY($1::text[]) AND address IS NULL', [
            accepted,
          ]);
          const { rows: all } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM wallets WHERE email = ANY($1::text[])', [accepted]);
          return open[0]?.n === 0 && all[0]?.n === accepted.length;
        },
        90_000,
      );
      const client = new SignerClient(restarted.url, restarted.token, 5_000, TEST_DEPLOYMENT);
      const { rows: made } = await db.query<{ address: string; key_id: string }>('SELECT address, key_id FROM wallets WHERE address IS NOT NULL');
      for (const w of made.slice(0, 200)) expect((await client.getKey(w.key_id))?.address, w.key_id).to.equal(w.address);
    } finally {
      api.proc.kill('SIGKILL');
      await api.exited;
      await db.end().catch(() => undefined);
      await restarted?.destroy();
      await signer.destroy();
      await stack.teardown();
    }
  });

  it('the API killed with SIGKILL mid-load (memberships, webhooks and wallets): nothing committed is lost, nothing duplicated', async () => {
    const stack = await surroundings();
    const { receiver } = stack;
    const databaseUrl = await freshDatabase('faults_api');
    const apiPort = await freePort();
    const env = {
      ROLE: 'all',
      DATABASE_URL: databaseUrl,
      DATA_DIR: stack.dir,
      OIDC_CA_FILE: stack.caFile,
      RATE_LIMIT_PROJECT: '0',
      PORT: String(apiPort),
      OPERATOR_TOKEN: stack.operatorToken,
      RATE_LIMIT_TOKEN: '0',
      RELAY_POLL_MS: '100',
      EGRESS_ALLOW_PRIVATE: '127.0.0.0/8,::1/128',
    };
    let service = spawnService(env);
    const db = new pg.Client({ connectionString: databaseUrl });
    try {
      await service.waitFor(/listening on http/, 60_000);
      await db.connect();
      const operator = new Client(`http://127.0.0.1:${apiPort}`, stack.operatorToken);
      const org = await operator.post('/api/v1/organisations', { name: 'API faults' });
      const iss = await stack.idp.issuer();
      const project = await operator.post(`/api/v1/organisations/${org.body.id}/projects`, { name: 'p', issuer: iss.issuer });
      await operator.post(`/api/v1/project/${project.body.id}/webhooks`, { url: receiver.url, events: ['membership.issued'] });
      const client = operator;
      const q = `?projectId=${project.body.id}` as const;

      const committed: string[] = [];
      let stop = false;
      const loop = async () => {
        while (!stop) {
          let res;
          try {
            res = await client.post(`/api/v1/membership/issue${q}`, [{ membershipType: 'load:one', walletAddress: address() }]);
          } catch {
            await new Promise((r) => setTimeout(r, 50)); // the process is gone; it comes back
            continue;
          }
          if (res.status === 201) committed.push(required(res.body.memberships[0]).tokenId);
          else expect([503]).to.include(res.status);
        }
      };
      // Wallets too: createasync for new users alongside.
      const accepted: string[] = [];
      let n = 0;
      const wallets = async () => {
        while (!stop) {
          const email = `api-fault-${n++}@example.com`;
          const jwt = await iss.sign({ email }, { audience: 'urn:custody:testnet', expiresIn: '1h' });
          let res;
          try {
            res = await operator.withToken(jwt).post('/api/v1/wallets/createasync', { key: project.body.projectKey });
          } catch {
            await new Promise((r) => setTimeout(r, 50));
            continue;
          }
          if (res.status === 202) accepted.push(email);
          else expect([503]).to.include(res.status);
        }
      };
      const load = [loop(), loop(), loop(), loop(), wallets()];
      await until('memberships under load', () => committed.length >= 100);
      service.proc.kill('SIGKILL');
      await service.exited;
      const before = committed.length;
      service = spawnService(env);
      await service.waitFor(/listening on http/, 60_000);
      await until('memberships again after the restart', () => committed.length >= before + 100, 60_000);
      stop = true;
      await Promise.all(load);

      // Nothing committed is lost: each answered membership is there once, with one issued event.
      const { rows: found } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM memberships WHERE id = ANY($1::bigint[])', [committed.map(Number)]);
      expect(found[0]?.n).to.equal(committed.length);
      const { rows: events } = await db.query<{ token: string; n: number }>(
        `SELECT e->'data'->>'tokenId' AS token, count(*)::int AS n FROM outbox o CROSS JOIN LATERAL json_array_elements(o.payload::json) e
          WHERE o.kind = 'event' AND e->>'type' = 'membership.issued' GROUP BY 1`,
      );
      const eventCount = new Map(events.map((r) => [r.token, r.n]));
      for (const id of committed) expect(eventCount.get(id), id).to.equal(1);
      // Every committed event reaches the subscription (at least once, same webhook-id on a re-send).
      await until(
        'every issued event delivered',
        () => {
          const got = new Set(receiver.received.map((r) => (JSON.parse(r.body) as { data: { tokenId: string } }).data.tokenId));
          return committed.every((id) => got.has(id));
        },
        90_000,
      );
      const idsByToken = new Map<string, Set<string>>();
      for (const r of receiver.received) {
        const token = (JSON.parse(r.body) as { data: { tokenId: string } }).data.tokenId;
        idsByToken.set(token, new Set([...(idsByToken.get(token) ?? []), String(r.headers['webhook-id'])]));
      }
      for (const [token, ids] of idsByToken) expect(ids.size, token).to.equal(1);
      // Every accepted createasync ends with exactly one wallet, with an address.
      await until(
        'every accepted wallet created',
        async () => {
          const { rows } = await db.query<{ n: number; done: number }>(
            'SELECT count(*)::int AS n, count(address)::int AS done FROM wallets WHERE email = ANY($1::text[])',
            [accepted],
          );
          return rows[0]?.n === accepted.length && rows[0].done === accepted.length;
        },
        90_000,
      );
      expect(accepted.length).to.be.greaterThan(10);
    } finally {
      service.proc.kill('SIGKILL');
      await service.exited;
      await db.end().catch(() => undefined);
      await stack.teardown();
    }
  });
});
