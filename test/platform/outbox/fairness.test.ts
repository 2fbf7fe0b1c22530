import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { createDb } from '../../../src/platform/db/knex.js';
import { migrateLatest } from '../../../src/platform/db/migrate.js';
import { scratchDatabase } from '../../support/process.js';
import { shareRunDeployment } from '../../support/db.js';
import { startAppWithIdp, type TestApp } from '../../support/app.js';
import { createOrganisation, createProject } from '../../support/factories.js';
import type { TestIdp } from '../../support/idp.js';
import { Receiver } from '../../support/receiver.js';
import { until } from '../../support/wait.js';

const AUDIENCE = 'urn:custody:testnet';

describe('outbox: fair to tenants', function () {
  this.timeout(180_000);
  let env: Awaited<ReturnType<typeof startAppWithIdp>>;
  let app: TestApp;
  let idp: TestIdp;
  let blackHole: Receiver;
  let scratch: { url: string; drop(): Promise<void> };
  let db: Knex;
  /** Organisations left with thousands of failing deliveries: deleted at the end, so that their work goes quiet. */
  const noisy: number[] = [];

  before(async () => {
    // Its own database: the thousands of deliveries it leaves would slow every suite after it.
    scratch = await scratchDatabase();
    db = createDb({ url: scratch.url, poolMax: 10 });
    await migrateLatest(db);
    await shareRunDeployment(db);
    // Attempts to the black hole hang for the whole test: a timeout longer than it runs.
    env = await startAppWithIdp(
      { DATABASE_URL: scratch.url, WEBHOOK_TIMEOUT_MS: '120000', WALLET_WEBHOOK_BACKGROUND_RETRY: 'false', JWKS_REFETCH_INTERVAL_MS: '0' },
      db,
    );
    ({ app, idp } = env);
    blackHole = await Receiver.start();
    blackHole.respond = () => 'hang';
  });
  after(async () => {
    for (const id of noisy) expect((await app.client.delete(`/api/v1/organisations/${id}`)).status).to.equal(204);
    // The hanging attempts end (connection closed) before the relay is asked to stop.
    await blackHole.close();
    await env.close();
    await db.destroy();
    await scratch.drop();
  });

  async function tenant(walletWebhookUrl: string) {
    const iss = await idp.issuer();
    const org = await createOrganisation(app.client);
    const project = await createProject(app.client, org.id, { issuer: iss.issuer, walletWebhookUrl });
    const createAsync = async (email: string) => {
      const res = await app.client.post(
        '/api/v1/wallets/createasync',
        { key: project.projectKey },
        { token: await iss.sign({ email }, { audience: AUDIENCE }) },
      );
      expect(res.status, res.text).to.equal(202);
    };
    return { org, project, createAsync };
  }

  it("keeps one tenant's never-answering endpoints and 1,000-item issues from delaying another tenant's createasync webhooks", async () => {
    const { hostConcurrency, projectConcurrency } = {
      hostConcurrency: app.config.webhookHostConcurrency,
      projectConcurrency: app.config.relayProjectConcurrency,
    };
    // Tenant A: every endpoint it has never answers; it subscribes five of them to everything,
    // issues three batches of 1,000 memberships and queues wallets whose webhooks hang too.
    const a = await tenant(`${blackHole.url}/wallets`);
    noisy.push(a.org.id);
    for (let i = 0; i < 5; i++) {
      const res = await app.client.post(`/api/v1/project/${a.project.id}/webhooks`, { url: `${blackHole.url}/sub${i}`, events: ['*'] });
      expect(res.status, res.text).to.equal(201);
    }
    for (let batch = 0; batch < 3; batch++) {
      const items = Array.from({ length: 1_000 }, () => ({ membershipType: 'gym:gold', walletAddress: `0x${randomBytes(20).toString('hex')}` }));
      const res = await app.client.post(`/api/v1/membership/issue?projectId=${a.project.id}`, items);
      expect(res.status, res.text).to.equal(201);
    }
    await Promise.all(Array.from({ length: 20 }, (_, i) => a.createAsync(`a${i}@example.com`)));
    // A's attempts are in flight and hanging, as many as its bounds let it have.
    await until('tenant A holding attempts', () => blackHole.open >= hostConcurrency);

    // Tenant B, meanwhile: ten wallets queued, ten wallet-created webhooks to a healthy receiver.
    const b = await tenant(env.receiver.url);
    await Promise.all(Array.from({ length: 10 }, (_, i) => b.createAsync(`b${i}@example.com`)));
    const received = await env.receiver.waitFor(10, 60_000);
    expect(received.map((r) => (JSON.parse(r.body) as { emailAddress: string }).emailAddress).sort()).to.deep.equal(
      Array.from({ length: 10 }, (_, i) => `b${i}@example.com`).sort(),
    );
    // A was still being attempted while B was served: nothing of A's was answered, and it never
    // held more than its bounds (one host: per lane at most the host bound; two lanes).
    expect(blackHole.open).to.be.greaterThan(0);
    expect(blackHole.open).to.be.at.most(2 * Math.min(hostConcurrency, projectConcurrency));
    const aPending = await app.db('outbox').where({ project_id: a.project.id }).whereIn('status', ['pending']).count({ n: '*' }).first();
    expect(Number(aPending?.n)).to.be.greaterThan(0);
  });

  it('caps live subscriptions per project (WEBHOOK_SUBSCRIPTIONS_PER_PROJECT, default 50): 409 subscription_limit, and a deleted one frees its place', async () => {
    expect(app.config.webhookSubscriptionsPerProject).to.equal(50);
    const org = await createOrganisation(app.client);
    const project = await createProject(app.client, org.id);
    const ids: number[] = [];
    for (let i = 0; i < 50; i++) {
      const res = await app.client.post(`/api/v1/project/${project.id}/webhooks`, { url: `${env.receiver.url}/${i}`, events: ['*'] });
      expect(res.status, res.text).to.equal(201);
      ids.push(res.body.id);
    }
    const over = await app.client.post(`/api/v1/project/${project.id}/webhooks`, { url: `${env.receiver.url}/51`, events: ['*'] });
    expect(over.status).to.equal(409);
    expect(over.body).to.include({ code: 'subscription_limit' });
    expect(await app.db('webhook_subscriptions').where({ project_id: project.id }).whereNull('deleted_at').count({ n: '*' }).first()).to.deep.equal({ n: 50 });
    expect((await app.client.delete(`/api/v1/project/${project.id}/webhooks/${ids[0]}`)).status).to.equal(204);
    expect((await app.client.post(`/api/v1/project/${project.id}/webhooks`, { url: `${env.receiver.url}/51`, events: ['*'] })).status).to.equal(201);
  });
});
