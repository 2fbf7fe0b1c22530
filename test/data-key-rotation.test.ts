import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import path from 'node:path';
import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { migrateLatest } from '../src/platform/db/migrate.js';
import { SEALED_COLUMNS } from '../src/programs/sealed.js';
import { DEV_ISSUER } from '../src/access/auth/dev-idp.js';
import { startApp, type TestApp } from './support/app.js';
import { ownDatabase, shareRunDeployment, testDb } from './support/db.js';
import { createOrganisation, createProject } from './support/factories.js';
import { Client } from './support/http.js';
import { Receiver } from './support/receiver.js';
import { until } from './support/wait.js';

const CLI = path.resolve('dist/src/programs/cli/main.js');

/** The fields of the answers the load reads. */
interface Answer {
  status: number;
  text: string;
  body: { id: number; secret: string; nextCursor?: string | null };
}
const answer = (p: Promise<unknown>) => p as Promise<Answer>;

function cli(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: { PATH: process.env['PATH'] ?? '', ...env }, timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

// The two formats SecretBox writes: v2 with a key id, and v1 before key ids.
const SEALED_V2 = String.raw`v2\.[A-Za-z0-9_-]{8}\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]{22}`;
const SEALED_V1 = String.raw`v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]{22}`;

describe('the data encryption key rotates in place', function () {
  this.timeout(240_000);

  it('every sealed value in the database is in a column the re-encryption walks', async () => {
    const app = await startApp();
    try {
      // One value of every kind the service seals: a wallet webhook secret (and its previous one),
      // a subscription's secret (and its previous one), a stored idempotent answer, the dev IdP's key.
      const org = await createOrganisation(app.client);
      // A claim of its own: other organisations of the run trust the development issuer too.
      const project = await createProject(app.client, org.id, {
        issuer: DEV_ISSUER,
        tokenClaim: { name: 'azp', value: `sealed-${org.id}` },
        walletWebhookUrl: 'https://hooks.example.com/w',
      });
      expect((await app.client.post(`/api/v1/project/${project.id}/walletWebhook/secret`, {})).status).to.equal(200);
      const sub = await app.client.post(
        `/api/v1/project/${project.id}/webhooks`,
        { url: 'https://hooks.example.com/s', events: ['webhook.test'] },
        { headers: { 'idempotency-key': randomUUID() } },
      );
      expect(sub.status, sub.text).to.equal(201);
      expect((await app.client.post(`/api/v1/project/${project.id}/webhooks/${sub.body.id}/secret`, {})).status).to.equal(200);
      const dev = await app.client.post(`/api/v1/project/${project.id}/dev/token`, { email: 'sealed@example.com' });
      expect(dev.status, dev.text).to.equal(200);

      const db = testDb();
      const columns = (
        await db.raw<{ rows: Array<{ table_name: string; column_name: string; data_type: string }> }>(
          `SELECT table_name, column_name, data_type FROM information_schema.columns
            WHERE table_schema = 'public' AND data_type IN ('text', 'character varying', 'jsonb', 'json')`,
        )
      ).rows;
      const found: string[] = [];
      for (const c of columns) {
        const anchored = c.data_type === 'jsonb' || c.data_type === 'json' ? `"(${SEALED_V2}|${SEALED_V1})"` : `^(${SEALED_V2}|${SEALED_V1})$`;
        const { rows } = await db.raw<{ rows: Array<{ n: string }> }>(`SELECT count(*) AS n FROM ?? WHERE ??::text ~ ?`, [
          c.table_name,
          c.column_name,
          anchored,
        ]);
        if (Number(rows[0]?.n) > 0) found.push(`${c.table_name}.${c.column_name}`);
      }
      const walked = SEALED_COLUMNS.map((col) => `${col.table}.${col.column}`);
      expect(
        found.filter((f) => !walked.includes(f)),
        'sealed values in columns the re-encryption does not walk',
      ).to.deep.equal([]);
      // And every kind made above was found where it is declared.
      expect(found).to.include.members(walked);
    } finally {
      await app.close();
    }
  });

  it('rotates under load across rolling instances with zero failed requests; the re-encryption job moves every value, then the old key can go', async () => {
    const own = await ownDatabase(`custody_datakey_${randomBytes(4).toString('hex')}`);
    await migrateLatest(own.db);
    await shareRunDeployment(own.db);
    const receiver = await Receiver.start();
    const k1 = randomBytes(32).toString('base64');
    const k2 = randomBytes(32).toString('base64');
    const operatorToken = `sk_test_${randomBytes(24).toString('base64url')}`;
    const instances: TestApp[] = [];
    const start = async (keys: Record<string, string>) => {
      const app = await startApp({ DATABASE_URL: own.url, RELAY_POLL_MS: '50', WEBHOOK_SUBSCRIPTIONS_PER_PROJECT: '10000', ...keys }, own.db, {
        relay: true,
        operatorToken,
      });
      instances.push(app);
      return app;
    };
    // What the load balancer sends to: an instance leaves it before it stops, as readiness does.
    const live: Array<{ app: TestApp; inFlight: Set<Promise<unknown>> }> = [];
    let turn = 0;
    const pick = () => {
      const entry = live[turn++ % live.length];
      if (!entry) throw new Error('no live instance');
      return entry;
    };
    const call = async <T>(fn: (c: Client) => Promise<T>): Promise<T> => {
      const entry = pick();
      const p = fn(new Client(entry.app.url, operatorToken));
      entry.inFlight.add(p);
      try {
        return await p;
      } finally {
        entry.inFlight.delete(p);
      }
    };
    const join = (app: TestApp) => live.push({ app, inFlight: new Set() });
    const leave = async (app: TestApp) => {
      const i = live.findIndex((e) => e.app === app);
      const [entry] = live.splice(i, 1);
      await Promise.allSettled([...(entry?.inFlight ?? [])]);
      await app.close();
    };

    try {
      join(await start({ DATA_ENCRYPTION_KEY: k1 }));
      const org = await call((c) => createOrganisation(c));
      const project = await call((c) => createProject(c, org.id, { walletWebhookUrl: 'https://hooks.example.com/w' }));
      const hooks = `/api/v1/project/${project.id}/webhooks`;

      let phase = 'k1';
      const failures: string[] = [];
      const done: Record<string, number> = {};
      const secrets: string[] = [];
      let pings = 0;
      const expectStatus = (what: string, res: { status: number; text: string }, status: number) => {
        if (res.status !== status) failures.push(`${phase} ${what}: ${res.status} ${res.text.slice(0, 200)}`);
        return res.status === status;
      };
      let stop = false;
      const worker = async () => {
        while (!stop) {
          // A subscription made with an Idempotency-Key, its answer replayed (likely by another instance).
          const key = randomUUID();
          const body = { url: receiver.url, events: ['webhook.test'] };
          const made = await call((c) => answer(c.post(hooks, body, { headers: { 'idempotency-key': key } })));
          if (!expectStatus('create', made, 201)) continue;
          const again = await call((c) => answer(c.post(hooks, body, { headers: { 'idempotency-key': key } })));
          if (expectStatus('replay', again, 201) && again.body.secret !== made.body.secret) failures.push(`${phase} replay: another secret`);
          secrets.push(made.body.secret);
          // Its secret rotated, then a ping the relays sign with both secrets.
          const rotated = await call((c) => answer(c.post(`${hooks}/${made.body.id}/secret`, {})));
          if (expectStatus('rotate', rotated, 200)) secrets.push(rotated.body.secret);
          const ping = await call((c) => answer(c.post(`${hooks}/${made.body.id}/test`)));
          if (expectStatus('ping', ping, 202)) pings++;
          // A list paged across instances: a cursor from one opens on another.
          const first = await call((c) => answer(c.get(`${hooks}?limit=2`)));
          if (expectStatus('page 1', first, 200) && first.body.nextCursor) {
            expectStatus('page 2', await call((c) => answer(c.get(`${hooks}?limit=2&cursor=${encodeURIComponent(first.body.nextCursor ?? '')}`))), 200);
          }
          expectStatus('wallet secret', await call((c) => c.post(`/api/v1/project/${project.id}/walletWebhook/secret`, {})), 200);
          done[phase] = (done[phase] ?? 0) + 1;
          rounds++;
        }
      };
      const load = [worker(), worker(), worker()];
      // Each step waits for rounds of load that ended after it (a clock would depend on the machine's speed).
      let rounds = 0;
      const settle = async () => {
        const from = rounds;
        await until('rounds of load', () => rounds >= from + 3 || failures.length > 0, 120_000);
      };

      await settle();
      // 1. Every instance learns the new key before any seals with it.
      phase = 'k1+read k2';
      join(await start({ DATA_ENCRYPTION_KEY: k1, DATA_DECRYPTION_KEYS: k2 }));
      await settle();
      await leave(instances[0] as TestApp);
      await settle();
      // 2. New values under the new key; the old one still opens what it sealed.
      phase = 'k2+read k1';
      join(await start({ DATA_ENCRYPTION_KEY: k2, DATA_DECRYPTION_KEYS: k1 }));
      await settle();
      await leave(instances[1] as TestApp);
      // 3. The job moves every value, beside the load.
      phase = 're-encrypt';
      const before = await cli(['data-key', 'status'], { DATABASE_URL: own.url, DATA_ENCRYPTION_KEY: k2, DATA_DECRYPTION_KEYS: k1 });
      expect(before.code, 'values under the old key are left').to.equal(1);
      const job = await cli(['data-key', 'reencrypt', '--batch', '7'], { DATABASE_URL: own.url, DATA_ENCRYPTION_KEY: k2, DATA_DECRYPTION_KEYS: k1 });
      expect(job.code, job.stderr).to.equal(0);
      expect(job.stderr).to.match(/every sealed value is under the current key/);
      const moved = Object.fromEntries([...job.stdout.matchAll(/^(\S+\.\S+)\s+(\d+)\s+(\d+)\s*$/gm)].map((m) => [m[1], Number(m[2])]));
      expect(moved['webhook_subscriptions.secret_enc'], job.stdout).to.be.greaterThan(0);
      expect(moved['idempotency_keys.response_body'], job.stdout).to.be.greaterThan(0);
      expect(moved['dev_idp_key.private_key_sealed'], job.stdout).to.equal(1);
      // Run again: nothing left to move.
      const again = await cli(['data-key', 'reencrypt'], { DATABASE_URL: own.url, DATA_ENCRYPTION_KEY: k2, DATA_DECRYPTION_KEYS: k1 });
      expect(again.code, again.stderr).to.equal(0);
      expect([...again.stdout.matchAll(/^\S+\.\S+\s+(\d+)\s+0\s*$/gm)].map((m) => Number(m[1]))).to.satisfy(
        (ns: number[]) => ns.length === SEALED_COLUMNS.length && ns.every((n) => n === 0),
      );
      await settle();
      // 4. The old key goes.
      phase = 'k2';
      join(await start({ DATA_ENCRYPTION_KEY: k2 }));
      await settle();
      await leave(instances[2] as TestApp);
      await settle();
      stop = true;
      await Promise.all(load);

      expect(failures, failures.join('\n')).to.deep.equal([]);
      for (const p of ['k1', 'k1+read k2', 'k2+read k1', 're-encrypt', 'k2']) expect(done[p] ?? 0, `rounds of load in phase ${p}`).to.be.greaterThan(0);

      // Every ping was delivered, signed with the subscription's secrets.
      const received = await receiver.waitFor(pings, 60_000);
      for (const r of received) {
        const headers = {
          'webhook-id': String(r.headers['webhook-id']),
          'webhook-timestamp': String(r.headers['webhook-timestamp']),
          'webhook-signature': String(r.headers['webhook-signature']),
        };
        expect(
          secrets.some((s) => {
            try {
              new Webhook(s).verify(r.body, headers);
              return true;
            } catch {
              return false;
            }
          }),
          `a ping signed with a known secret`,
        ).to.equal(true);
      }
      const failedDeliveries = await own.db('outbox').whereIn('status', ['failed']).count<Array<{ count: string }>>('* as count');
      expect(Number(failedDeliveries[0]?.count)).to.equal(0);

      // Without the old key every value still opens; with only the old key none is current.
      const status = await cli(['data-key', 'status'], { DATABASE_URL: own.url, DATA_ENCRYPTION_KEY: k2 });
      expect(status.code, status.stderr).to.equal(0);
      const old = await cli(['data-key', 'status'], { DATABASE_URL: own.url, DATA_ENCRYPTION_KEY: k1 });
      expect(old.code).to.equal(1);
      expect(old.stderr).to.match(/value\(s\) under other keys/);
    } finally {
      for (const e of live.splice(0)) await e.app.close().catch(() => undefined);
      await receiver.close();
      await own.drop();
    }
  });
});
