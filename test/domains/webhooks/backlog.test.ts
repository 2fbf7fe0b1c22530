import { createHash, randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { eventsFannedOut } from '../../../src/platform/logging/metrics.js';
import { startAppWithIdp, type TestApp } from '../../support/app.js';
import { createOrganisation, createProject } from '../../support/factories.js';
import { Receiver } from '../../support/receiver.js';
import { until } from '../../support/wait.js';

const BACKLOG = 3;

/** A delivery's webhook-id as the fan-out derives it (src/domains/webhooks/fanout.ts), written out independently. */
const deliveryMessageId = (eventId: string, subscriptionId: number): string =>
  `msg_${createHash('sha256').update(`${eventId}:${subscriptionId}`).digest('hex').slice(0, 32)}`;

describe("webhooks: a subscription's backlog is bounded", function () {
  this.timeout(120_000);
  let env: Awaited<ReturnType<typeof startAppWithIdp>>;
  let app: TestApp;
  let dead: Receiver;

  before(async () => {
    // Failed attempts are retried ten minutes later: the test makes them due itself, not the clock.
    env = await startAppWithIdp({ WEBHOOK_BACKLOG_PER_SUBSCRIPTION: String(BACKLOG), WEBHOOK_RETRY_SCHEDULE: '0,600000,600000', RELAY_POLL_MS: '100' });
    app = env.app;
    dead = await Receiver.start();
    dead.status = 500;
  });
  after(async () => {
    await dead.close();
    await env.close();
  });

  async function setUp() {
    const org = await createOrganisation(app.client);
    const project = await createProject(app.client, org.id);
    const hooks = `/api/v1/project/${project.id}/webhooks` as const;
    const healthy = await app.client.post(hooks, { url: `${env.receiver.url}/healthy-${project.id}`, events: ['membership.issued'] });
    const failing = await app.client.post(hooks, { url: `${dead.url}/dead-${project.id}`, events: ['membership.issued'] });
    expect([healthy.status, failing.status]).to.deep.equal([201, 201]);
    const issue = async () => {
      const items = Array.from({ length: 5 }, () => ({ membershipType: 'gym:gold', walletAddress: `0x${randomBytes(20).toString('hex')}` }));
      const res = await app.client.post(`/api/v1/membership/issue?projectId=${project.id}`, items);
      expect(res.status, res.text).to.equal(201);
    };
    const pending = async (subscriptionId: number) =>
      Number((await app.db('outbox').where({ subscription_id: subscriptionId, kind: 'delivery', status: 'pending' }).count({ n: '*' }).first())?.n);
    // Recorded event rows still owed to a subscription (pending, naming it in owed_to).
    const owing = (subscriptionId: number) =>
      app.db('outbox').where({ kind: 'event', status: 'pending' }).whereRaw('? = ANY(owed_to)', [subscriptionId]).orderBy('id');
    return { project, healthy: healthy.body, failing: failing.body, issue, pending, owing };
  }

  const eventOf = (x: { body: string }) => (JSON.parse(x.body) as { id: string }).id;
  const projectOf = (x: { body: string }) => (JSON.parse(x.body) as { projectId: number }).projectId;

  it("keeps a failing subscription's share of newer events owed at its bound (one row per change, nothing copied), while the project's other subscriptions get theirs at once; delivers them all once it recovers", async () => {
    const t = await setUp();
    const forHealthy = () => env.receiver.received.filter((r) => projectOf(r) === t.project.id);
    const forDead = () => dead.received.filter((r) => projectOf(r) === t.project.id);

    await t.issue();
    await until('the first five tried at both', () => forHealthy().length >= 5 && forDead().length >= 5);
    await until('five failed deliveries waiting for their retry', async () => (await t.pending(t.failing.id)) === 5);

    // At its bound: two more changes reach the healthy subscription at once, the failing one's share waits compact.
    await t.issue();
    await t.issue();
    await until('fifteen events at the healthy subscription', () => forHealthy().length >= 15);
    // A change claimed while the healthy subscription's earlier deliveries were in flight owes it for
    // a moment too (deliveries in flight count toward a bound): it is served, and its row says so once
    // that fan-out commits.
    await until('two changes owed to the failing subscription alone', async () => {
      const rows = await t.owing(t.failing.id);
      return rows.length === 2 && rows.every((r) => (r.owed_to as string[]).map(Number).join() === String(t.failing.id));
    });
    expect(await t.pending(t.failing.id)).to.equal(5);
    expect(forDead()).to.have.length(5);
    const deferred = await t.owing(t.failing.id);
    expect(deferred.map((r) => [r.project_id, (r.owed_to as string[]).map(Number)])).to.deep.equal([
      [t.project.id, [t.failing.id]],
      [t.project.id, [t.failing.id]],
    ]);
    expect(await app.db('outbox').where({ kind: 'event', project_id: t.project.id })).to.have.length(3);
    // The subscription's count of rows owing it is kept with them.
    expect(await app.db('webhook_subscriptions').where({ id: t.failing.id }).first('owed')).to.deep.equal({ owed: 2 });
    // Each is the change's own recorded row (three events per membership); the subscription takes its five.
    for (const r of deferred) expect((JSON.parse(r.payload) as Array<{ type: string }>).filter((e) => e.type === 'membership.issued')).to.have.length(5);

    // It recovers and its retries come due: the backlog drains, then the deferred events follow.
    dead.status = 200;
    await app.db('outbox').where({ subscription_id: t.failing.id, kind: 'delivery', status: 'pending' }).update({ next_attempt_at: app.db.fn.now() });
    await until('every event at the recovered subscription', () => new Set(forDead().map(eventOf)).size >= 15);
    const healthyIds = new Set(forHealthy().map(eventOf));
    expect(new Set(forDead().map(eventOf))).to.deep.equal(healthyIds);
    expect(healthyIds.size).to.equal(15);
    // A deferred delivery carries the webhook-id it would have had without the wait.
    for (const r of forDead()) expect(r.headers['webhook-id']).to.equal(deliveryMessageId(eventOf(r), t.failing.id));
    await until('nothing owed any more', async () => (await t.owing(t.failing.id)).length === 0);
    expect(await app.db('webhook_subscriptions').where({ id: t.failing.id }).first('owed')).to.deep.equal({ owed: 0 });
    expect(await t.pending(t.failing.id)).to.equal(0);
    expect((await app.db('outbox').where({ kind: 'event', project_id: t.project.id })).map((r) => r.status)).to.deep.equal(['done', 'done', 'done']);
  });

  it("keeps a disabled subscription's owed share until it is enabled again, and ends a deleted one's with no delivery", async () => {
    const t = await setUp();
    const forDead = () => dead.received.filter((r) => projectOf(r) === t.project.id);
    const deferredAtBound = async () => {
      dead.status = 500;
      await t.issue();
      await until('five failed deliveries waiting for their retry', async () => (await t.pending(t.failing.id)) === 5);
      await t.issue();
      await until('a change owed', async () => (await t.owing(t.failing.id)).length === 1);
    };
    await deferredAtBound();

    // Disabled (as a 410 does), its failing deliveries listed as failed: the row waits, though the backlog is gone.
    await app.db('webhook_subscriptions').where({ id: t.failing.id }).update({ disabled_at: app.db.fn.now(), disabled_reason: 'gone' });
    await app.db('outbox').where({ subscription_id: t.failing.id, kind: 'delivery', status: 'pending' }).update({ status: 'failed' });
    await new Promise((r) => setTimeout(r, 500)); // several polls
    expect(await t.owing(t.failing.id)).to.have.length(1);

    // Enabled again (any PUT): its deferred events are delivered.
    dead.status = 200;
    const before = forDead().length;
    expect((await app.client.put(`/api/v1/project/${t.project.id}/webhooks/${t.failing.id}`, { events: ['membership.issued'] })).status).to.equal(200);
    await until('the deferred events delivered', () => forDead().length >= before + 5);
    await until('nothing owed', async () => (await t.owing(t.failing.id)).length === 0);

    // Deleted: the change owed to it is claimed and ends; nothing is sent.
    await deferredAtBound();
    const sent = forDead().length;
    expect((await app.client.delete(`/api/v1/project/${t.project.id}/webhooks/${t.failing.id}`)).status).to.equal(204);
    await until('nothing owed', async () => (await t.owing(t.failing.id)).length === 0);
    expect(forDead()).to.have.length(sent);
  });

  it('fans a change of more events than one claim may build out to a few subscriptions at a time, each event to each subscription once', async () => {
    const org = await createOrganisation(app.client);
    const project = await createProject(app.client, org.id);
    const subs: number[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await app.client.post(`/api/v1/project/${project.id}/webhooks`, { url: `${env.receiver.url}/wide-${i}`, events: ['*'] });
      expect(res.status, res.text).to.equal(201);
      subs.push(res.body.id);
    }
    // And one whose endpoint fails: its 1,200 deliveries become rows, written in several statements.
    dead.status = 500;
    const failing = await app.client.post(`/api/v1/project/${project.id}/webhooks`, { url: `${dead.url}/wide-dead`, events: ['*'] });
    expect(failing.status, failing.text).to.equal(201);
    const owedBefore = await owedCount();
    const items = Array.from({ length: 400 }, () => ({ membershipType: 'gym:gold', walletAddress: `0x${randomBytes(20).toString('hex')}` }));
    expect((await app.client.post(`/api/v1/membership/issue?projectId=${project.id}`, items)).status).to.equal(201);
    // 1,200 events (three per membership) to each of three subscriptions.
    const mine = () => env.receiver.received.filter((r) => projectOf(r) === project.id);
    await until('3,600 deliveries', () => mine().length >= 3_600, 60_000);
    await new Promise((r) => setTimeout(r, 300));
    const ids = mine().map((r) => String(r.headers['webhook-id']));
    expect(ids).to.have.length(3_600);
    expect(new Set(ids).size).to.equal(3_600);
    for (const sub of subs) expect(mine().filter((r) => r.headers['webhook-id'] === deliveryMessageId(eventOf(r), sub))).to.have.length(1_200);
    await until('1,200 failed deliveries written as rows', async () => {
      const n = await app.db('outbox').where({ subscription_id: failing.body.id, kind: 'delivery', status: 'pending' }).count({ n: '*' }).first();
      return Number(n?.n) === 1_200;
    });
    const rows = await app.db('outbox').where({ subscription_id: failing.body.id, kind: 'delivery' }).select('message_id', 'payload', 'event_id');
    expect(new Set(rows.map((r) => r.message_id)).size).to.equal(1_200);
    for (const r of rows) {
      expect(r.message_id).to.equal(deliveryMessageId(r.event_id, failing.body.id));
      expect((JSON.parse(r.payload) as { id: string }).id).to.equal(r.event_id);
    }
    // More than one claim's budget: the row owed the subscriptions not served in its first claim.
    expect((await owedCount()) - owedBefore).to.be.greaterThan(0);
    expect((await app.db('outbox').where({ kind: 'event', project_id: project.id })).map((r) => r.status)).to.deep.equal(['done']);
  });

  async function owedCount(): Promise<number> {
    return (await eventsFannedOut.get()).values.find((v) => v.labels['what'] === 'deferred')?.value ?? 0;
  }
});
