import { shareRunDeployment } from '../../support/db.js';
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { getAddress } from 'ethers';
import type { Knex } from 'knex';
import { createDb } from '../../../src/platform/db/knex.js';
import { startApp, type TestApp } from '../../support/app.js';
import { createTenant } from '../../support/factories.js';
import { scratchDatabase, spawnService, type Service } from '../../support/process.js';
import { Receiver } from '../../support/receiver.js';
import { sharedSigner } from '../../support/signer.js';
import { until } from '../../support/wait.js';

const address = () => getAddress(`0x${randomBytes(20).toString('hex')}`);
const items = (n: number) => Array.from({ length: n }, () => ({ membershipType: 'gym:gold', walletAddress: address() }));

describe('webhook deliveries: a hanging endpoint, several workers, a killed worker', function () {
  this.timeout(180_000);

  it('a dead endpoint that never answers does not delay deliveries to a healthy one', async () => {
    const app = await startApp(
      { WEBHOOK_TIMEOUT_MS: '60000', WEBHOOK_CONNECT_TIMEOUT_MS: '60000', RELAY_CONCURRENCY: '16', WEBHOOK_ENDPOINT_CONCURRENCY: '4', RELAY_POLL_MS: '50' },
      undefined,
      { relay: true },
    );
    const dead = await Receiver.start();
    const healthy = await Receiver.start();
    dead.respond = () => 'hang';
    try {
      const t = await createTenant(app.client);
      const hooks = `/api/v1/project/${t.project.id}/webhooks` as const;
      const deadSub = await t.projectAdmin.post(hooks, { url: dead.url, events: ['*'] });
      expect((await t.projectAdmin.post(hooks, { url: healthy.url, events: ['*'] })).status).to.equal(201);
      expect((await t.projectAdmin.post('/api/v1/membership/issue', items(40))).status).to.equal(201);

      await until('120 deliveries to the healthy endpoint', () => healthy.received.length >= 120);
      // Every delivery to the healthy endpoint arrived while the dead one's attempts are still open.
      expect(healthy.received).to.have.length(120);
      expect(dead.open).to.equal(4);
      expect(dead.received).to.have.length(4);
      await t.projectAdmin.delete(`${hooks}/${deadSub.body.id}`);
    } finally {
      await dead.close();
      await healthy.close();
      await app.close();
    }
  });

  describe('ROLE=worker processes side by side', () => {
    let scratch: { url: string; drop(): Promise<void> };
    let db: Knex;
    let app: TestApp;
    let receiver: Receiver;
    const workers: Service[] = [];

    const startWorker = async (env: Record<string, string> = {}) => {
      const signer = sharedSigner();
      const worker = spawnService({
        ROLE: 'worker',
        PORT: '0',
        DATABASE_URL: scratch.url,
        EGRESS_ALLOW_PRIVATE: '127.0.0.0/8,::1/128',
        KEYVAULT_URL: signer.url,
        KEYVAULT_TOKEN: signer.token,
        DATA_ENCRYPTION_KEY: app.dataEncryptionKey.toString('base64'),
        RELAY_POLL_MS: '100',
        ...env,
      });
      workers.push(worker);
      await worker.waitFor(/outbox relay running/);
      return worker;
    };

    before(async () => {
      scratch = await scratchDatabase();
      const migrate = spawnService({ ROLE: 'migrate', DATABASE_URL: scratch.url });
      expect(await migrate.exited, migrate.output()).to.equal(0);
      db = createDb({ url: scratch.url, poolMax: 10 });
      await shareRunDeployment(db);
      app = await startApp({ DATABASE_URL: scratch.url }, db);
      receiver = await Receiver.start();
    });
    after(async () => {
      for (const w of workers) w.proc.kill('SIGKILL');
      await Promise.all(workers.map((w) => w.exited));
      await receiver.close();
      await app.close();
      await db.destroy();
      await scratch.drop();
    });

    it('three workers deliver 6,000 events, each exactly once', async () => {
      await Promise.all([startWorker(), startWorker(), startWorker()]);
      const t = await createTenant(app.client);
      expect((await t.projectAdmin.post(`/api/v1/project/${t.project.id}/webhooks`, { url: receiver.url, events: ['*'] })).status).to.equal(201);
      for (let i = 0; i < 2; i++) expect((await t.projectAdmin.post('/api/v1/membership/issue', items(1_000))).status).to.equal(201);

      // Deliveries that succeed at once leave no row: the receiver is the record.
      await until(
        '6,000 deliveries received and nothing left to do',
        async () => {
          const { rows } = await db.raw<{ rows: Array<{ open: number }> }>(
            `SELECT count(*)::int AS open FROM outbox WHERE status <> 'done' AND kind IN ('event', 'delivery')`,
          );
          return receiver.received.length >= 6_000 && rows[0]?.open === 0;
        },
        150_000,
      );
      await new Promise((r) => setTimeout(r, 500));
      const ids = receiver.received.map((r) => r.headers['webhook-id']);
      expect(ids).to.have.length(6_000);
      expect(new Set(ids).size).to.equal(6_000);
      // Every event of the two issues arrived, once.
      const events = receiver.received.map((r) => (JSON.parse(r.body) as { id: string }).id);
      expect(new Set(events).size).to.equal(6_000);
      for (const w of workers.splice(0)) {
        w.proc.kill('SIGTERM');
        expect(await w.exited).to.equal(0);
      }
    });

    it('a worker killed mid-delivery loses nothing: another sends it again with the same webhook-id', async () => {
      // A short lease (timeouts + 5 s), so the delivery the killed worker held comes back soon.
      const fast = { WEBHOOK_TIMEOUT_MS: '1000', KEYVAULT_TIMEOUT_MS: '1000', WEBHOOK_RETRY_SCHEDULE: '0' };
      const first = await startWorker(fast);
      const t = await createTenant(app.client);
      const hooks = `/api/v1/project/${t.project.id}/webhooks` as const;
      const sub = await t.projectAdmin.post(hooks, { url: receiver.url, events: ['webhook.test'] });
      const before = receiver.received.length;
      receiver.respond = () => 'hang';
      const test = await t.projectAdmin.post(`${hooks}/${sub.body.id}/test`);
      expect(test.status).to.equal(202);
      await until('the attempt in flight', () => receiver.open === 1);
      first.proc.kill('SIGKILL');
      await first.exited;
      receiver.respond = undefined;
      await startWorker(fast);
      await until('the re-sent delivery', () => receiver.received.length === before + 2, 60_000);
      const [held, resent] = receiver.received.slice(before);
      expect(held?.headers['webhook-id']).to.equal(test.body.webhookId);
      expect(resent?.headers['webhook-id']).to.equal(test.body.webhookId);
      expect(resent?.body).to.equal(held?.body);
      await until('the delivery done', async () => (await db('outbox').where({ id: test.body.deliveryId }).first()).status === 'done');
    });

    it('a worker killed while it sends an event straight from its record loses nothing: the event is sent again with the same webhook-id', async () => {
      const fast = { WEBHOOK_TIMEOUT_MS: '1000', KEYVAULT_TIMEOUT_MS: '1000', WEBHOOK_RETRY_SCHEDULE: '0' };
      for (const w of workers.splice(0)) {
        w.proc.kill('SIGKILL');
        await w.exited;
      }
      const first = await startWorker(fast);
      const t = await createTenant(app.client);
      await t.projectAdmin.post(`/api/v1/project/${t.project.id}/webhooks`, { url: receiver.url, events: ['membership.issued'] });
      const before = receiver.received.length;
      receiver.respond = () => 'hang';
      expect((await t.projectAdmin.post('/api/v1/membership/issue', items(1))).status).to.equal(201);
      await until('the attempt in flight', () => receiver.open === 1);
      first.proc.kill('SIGKILL');
      await first.exited;
      receiver.respond = undefined;
      await startWorker(fast);
      await until('the event sent again', () => receiver.received.length === before + 2, 60_000);
      const [held, resent] = receiver.received.slice(before);
      expect(resent?.headers['webhook-id']).to.equal(held?.headers['webhook-id']);
      expect(resent?.body).to.equal(held?.body);
      expect(JSON.parse(resent?.body ?? '{}')).to.include({ type: 'membership.issued' });
      await until('the record done', async () => {
        const { rows } = await db.raw<{ rows: Array<{ open: number }> }>(`SELECT count(*)::int AS open FROM outbox WHERE kind = 'event' AND status <> 'done'`);
        return rows[0]?.open === 0;
      });
    });
  });
});
