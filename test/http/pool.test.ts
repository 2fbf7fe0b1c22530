import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { createDb } from '../../src/db/knex.js';
import { startApp, type TestApp } from '../support/app.js';
import { testDatabaseUrl } from '../support/db.js';
import { createOrganisation, createProject, createToken } from '../support/factories.js';
import type { Client, Reply } from '../support/http.js';
import { TestIdp, type TestIssuer } from '../support/idp.js';
import { SIGN_IN_PREFIX, siwePolicy } from '../support/policies.js';
import { Receiver } from '../support/receiver.js';

/** The API's pool in this suite; every write endpoint is called this many times twice over, at once. */
const POOL = 4;
const CONCURRENCY = 2 * POOL;
/** How long another tenant's read may take while a write endpoint is under that load. */
const BYSTANDER_MS = 100;
const AUDIENCE = 'urn:custody:testnet';

/** One tenant with everything some write endpoint acts on. */
interface Tenant {
  orgId: number;
  projectId: number;
  projectKey: string;
  operator: Client;
  admin: Client;
  signer: Client;
  walletId: number;
  walletAddress: string;
  readTokenId: number;
  webhookId: number;
  deliveryId: number;
  /** Memberships held by the wallet, one per concurrent call. */
  memberships: string[];
  issuer: TestIssuer;
  /** Where its webhooks go (nothing is delivered: no relay runs here). */
  hookUrl: string;
  user(email: string): Promise<Client>;
}

/** A call of one endpoint: who sends it, where, with what body. */
interface Call {
  client: Client;
  path: string;
  body?: unknown;
}

/** How to call each write endpoint validly (the `i`-th of the concurrent calls); `prepare` runs once before. */
interface Fixture {
  prepare?: (t: Tenant) => Promise<void>;
  call: (t: Tenant, i: number) => Call | Promise<Call>;
}

const OTHER_ADDRESS = '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359';

const fixtures: Record<string, Fixture> = {
  'POST /api/v1/organisations': { call: (t, i) => ({ client: t.operator, path: '/api/v1/organisations', body: { name: `storm ${i}` } }) },
  'PUT /api/v1/organisations/:id': { call: (t, i) => ({ client: t.operator, path: `/api/v1/organisations/${t.orgId}`, body: { name: `renamed ${i}` } }) },
  'DELETE /api/v1/organisations/:id': { call: (t) => ({ client: t.operator, path: `/api/v1/organisations/${t.orgId}` }) },
  'POST /api/v1/organisations/:id/undelete': {
    prepare: async (t) => {
      const res = await t.operator.delete(`/api/v1/organisations/${t.orgId}`);
      expect(res.status, res.text).to.equal(204);
    },
    call: (t) => ({ client: t.operator, path: `/api/v1/organisations/${t.orgId}/undelete` }),
  },
  'POST /api/v1/organisations/:id/projects': {
    call: (t, i) => ({ client: t.operator, path: `/api/v1/organisations/${t.orgId}/projects`, body: { name: `project ${i}`, issuer: t.issuer.issuer } }),
  },
  'PUT /api/v1/project/:projectId': {
    call: (t, i) => ({ client: t.admin, path: `/api/v1/project/${t.projectId}`, body: { requireVerifiedEmail: i % 2 === 0 } }),
  },
  'DELETE /api/v1/project/:projectId': { call: (t) => ({ client: t.operator, path: `/api/v1/project/${t.projectId}` }) },
  'POST /api/v1/project/:projectId/keys': { call: (t) => ({ client: t.operator, path: `/api/v1/project/${t.projectId}/keys`, body: { graceSeconds: 60 } }) },
  'POST /api/v1/project/:projectId/walletWebhook/secret': {
    call: (t) => ({ client: t.operator, path: `/api/v1/project/${t.projectId}/walletWebhook/secret` }),
  },
  'POST /api/v1/organisations/:id/tokens': {
    call: (t, i) => ({ client: t.operator, path: `/api/v1/organisations/${t.orgId}/tokens`, body: { name: `token ${i}`, role: 'read' } }),
  },
  'DELETE /api/v1/organisations/:id/tokens/:tokenId': {
    call: (t) => ({ client: t.operator, path: `/api/v1/organisations/${t.orgId}/tokens/${t.readTokenId}` }),
  },
  'POST /api/v1/signin': { call: async (t, i) => ({ client: await t.user(`signin${i}@example.com`), path: '/api/v1/signin', body: { key: t.projectKey } }) },
  'POST /api/v1/wallets/createasync': {
    call: async (t, i) => ({ client: await t.user(`async${i}@example.com`), path: '/api/v1/wallets/createasync', body: { key: t.projectKey } }),
  },
  'POST /api/v1/wallets/rpc': {
    call: async (t, i) => ({
      client: await t.user('ada@example.com'),
      path: '/api/v1/wallets/rpc',
      body: { key: t.projectKey, method: 'personal_sign', params: { message: `${SIGN_IN_PREFIX} #${i}` } },
    }),
  },
  'POST /api/v1/project/:projectId/wallets/:walletId/rpc': {
    call: (t, i) => ({
      client: t.signer,
      path: `/api/v1/project/${t.projectId}/wallets/${t.walletId}/rpc`,
      body: { method: 'personal_sign', params: { message: `order ${i}` } },
    }),
  },
  'POST /api/v1/membership/issue': {
    call: (t, i) => ({
      client: t.admin,
      path: `/api/v1/membership/issue?projectId=${t.projectId}`,
      body: [{ membershipType: `storm:m${i}`, walletAddress: t.walletAddress, expiration: 0, transferable: true }],
    }),
  },
  'POST /api/v1/membership/revoke': {
    call: (t, i) => ({ client: t.admin, path: `/api/v1/membership/revoke?projectId=${t.projectId}`, body: { tokenId: t.memberships[i] } }),
  },
  'POST /api/v1/membership/transfer': {
    call: (t, i) => ({
      client: t.admin,
      path: `/api/v1/membership/transfer?projectId=${t.projectId}`,
      body: { from: t.walletAddress, to: OTHER_ADDRESS, tokenId: t.memberships[i] },
    }),
  },
  'POST /api/v1/project/:projectId/webhooks': {
    call: (t) => ({ client: t.admin, path: `/api/v1/project/${t.projectId}/webhooks`, body: { url: t.hookUrl, events: ['membership.issued'] } }),
  },
  'PUT /api/v1/project/:projectId/webhooks/:webhookId': {
    call: (t) => ({ client: t.admin, path: `/api/v1/project/${t.projectId}/webhooks/${t.webhookId}`, body: { events: ['*'] } }),
  },
  'DELETE /api/v1/project/:projectId/webhooks/:webhookId': {
    call: (t) => ({ client: t.admin, path: `/api/v1/project/${t.projectId}/webhooks/${t.webhookId}` }),
  },
  'POST /api/v1/project/:projectId/webhooks/:webhookId/secret': {
    call: (t) => ({ client: t.admin, path: `/api/v1/project/${t.projectId}/webhooks/${t.webhookId}/secret` }),
  },
  'POST /api/v1/project/:projectId/webhooks/:webhookId/test': {
    call: (t) => ({ client: t.admin, path: `/api/v1/project/${t.projectId}/webhooks/${t.webhookId}/test` }),
  },
  'POST /api/v1/project/:projectId/webhooks/failedDeliveries/:deliveryId/retry': {
    call: (t) => ({ client: t.admin, path: `/api/v1/project/${t.projectId}/webhooks/failedDeliveries/${t.deliveryId}/retry` }),
  },
  'PUT /api/v1/project/:projectId/policy': { call: (t) => ({ client: t.admin, path: `/api/v1/project/${t.projectId}/policy`, body: policy }) },
  'PUT /api/v1/project/:projectId/policy/owners': {
    call: (t) => ({ client: t.admin, path: `/api/v1/project/${t.projectId}/policy/owners`, body: ownersExample }),
  },
};

/** Signs in-app messages for the user and orders for the backend, with a limit, so signing takes a limit place. */
const policy = {
  rules: [
    ...siwePolicy.rules,
    { name: 'orders', action: 'allow', method: 'personal_sign', caller: ['server'], conditions: [{ field: 'message', op: 'prefix', value: 'order ' }] },
  ],
  limits: [{ method: 'personal_sign', per: 'wallet', window: '1h', count: 1_000 }],
};
/** The document's example of the owners endpoint (a valid key), read from its declaration. */
let ownersExample: unknown;

describe('every write endpoint with Idempotency-Key at twice the pool size: no 503, other tenants unaffected', function () {
  this.timeout(300_000);
  let app: TestApp;
  let db: Knex;
  let idp: TestIdp;
  let dir: string;
  let receiver: Receiver;

  before(async () => {
    idp = await TestIdp.start();
    receiver = await Receiver.start();
    dir = mkdtempSync(path.join(tmpdir(), 'custody-pool-'));
    writeFileSync(path.join(dir, 'ca.pem'), idp.caPem);
    db = createDb({ url: testDatabaseUrl(), poolMax: POOL });
    app = await startApp({ OIDC_CA_FILE: path.join(dir, 'ca.pem') }, db);
    const owners = app.endpoints.find((d) => d.route.method === 'PUT' && d.route.path === '/api/v1/project/:projectId/policy/owners');
    ownersExample = owners?.schemas.doc?.requestExample;
  });
  after(async () => {
    await app.close();
    await db.destroy();
    await receiver.close();
    await idp.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function tenant(): Promise<Tenant> {
    const operator = app.client;
    const issuer = await idp.issuer();
    const org = await createOrganisation(operator);
    const project = await createProject(operator, org.id, { issuer: issuer.issuer, walletWebhookUrl: receiver.url });
    const admin = operator.withToken((await createToken(operator, org.id, 'admin', project.id)).token);
    const read = await createToken(operator, org.id, 'read');
    const minted = await operator.post(`/api/v1/organisations/${org.id}/tokens`, { name: 'backend', role: 'signer', projectId: project.id });
    expect(minted.status, minted.text).to.equal(201);
    const user = async (email: string) => operator.withToken(await issuer.sign({ email }, { audience: AUDIENCE }));
    const signin = await (await user('ada@example.com')).post('/api/v1/signin', { key: project.projectKey });
    expect(signin.status, signin.text).to.equal(200);
    const set = await admin.put(`/api/v1/project/${project.id}/policy`, policy);
    expect(set.status, set.text).to.equal(201);
    const hook = await admin.post(`/api/v1/project/${project.id}/webhooks`, { url: receiver.url, events: ['webhook.test'] });
    expect(hook.status, hook.text).to.equal(201);
    const sent = await admin.post(`/api/v1/project/${project.id}/webhooks/${hook.body.id}/test`);
    expect(sent.status, sent.text).to.equal(202);
    // No relay runs here: the queued test delivery is marked failed, as the relay leaves one.
    await app.db('outbox').where({ id: sent.body.deliveryId }).update({ status: 'failed' });
    const issued = await admin.post(
      `/api/v1/membership/issue?projectId=${project.id}`,
      Array.from({ length: CONCURRENCY }, (_, i) => ({
        membershipType: `held:m${i}`,
        walletAddress: signin.body.walletAddress,
        expiration: 0,
        transferable: true,
      })),
    );
    expect(issued.status, issued.text).to.equal(201);
    return {
      orgId: org.id,
      projectId: project.id,
      projectKey: project.projectKey,
      operator,
      admin,
      signer: operator.withToken(minted.body.token),
      walletId: signin.body.walletId,
      walletAddress: signin.body.walletAddress,
      readTokenId: read.id,
      webhookId: hook.body.id,
      deliveryId: sent.body.deliveryId,
      memberships: issued.body.memberships.map((m) => m.tokenId),
      issuer,
      hookUrl: receiver.url,
      user,
    };
  }

  it('has a way to call every declared write endpoint', () => {
    const writes = app.endpoints.filter((d) => d.route.write !== undefined).map((d) => `${d.route.method} ${d.route.path}`);
    expect(writes.length).to.be.greaterThan(20);
    expect(Object.keys(fixtures).sort()).to.deep.equal([...writes].sort());
  });

  it('answers every call without a 5xx while a read of another tenant stays under 100 ms', async () => {
    // The bystander: a read token of another organisation, reading its project's wallets.
    const bystanderOrg = await createOrganisation(app.client);
    const bystanderProject = await createProject(app.client, bystanderOrg.id);
    const bystander = app.client.withToken((await createToken(app.client, bystanderOrg.id, 'read', bystanderProject.id)).token);
    const read = () => bystander.get(`/api/v1/project/${bystanderProject.id}/wallets`);
    expect((await read()).status).to.equal(200);

    const writes = app.endpoints.filter((d) => d.route.write !== undefined);
    // Every endpoint is driven, and what went wrong with each is said at the end.
    const problems: string[] = [];
    for (const { route } of writes) {
      const name = `${route.method} ${route.path}`;
      const fixture = fixtures[name];
      if (!fixture) throw new Error(`no fixture for ${name}`);
      const t = await tenant();
      await fixture.prepare?.(t);
      const calls = await Promise.all(Array.from({ length: CONCURRENCY }, async (_, i) => fixture.call(t, i)));
      let over = false;
      const storm = Promise.all(
        calls.map((c, i) =>
          c.client.request(route.method, c.path, { ...(c.body === undefined ? {} : { json: c.body }), headers: { 'idempotency-key': `storm-${name}-${i}` } }),
        ),
      ).finally(() => (over = true));
      // Another tenant reads, one read after another, for as long as the calls run.
      let slowest = 0;
      do {
        const started = performance.now();
        const res = await read();
        const ms = performance.now() - started;
        slowest = Math.max(slowest, ms);
        if (res.status !== 200) problems.push(`${name}: another tenant's read answered ${res.status} after ${ms.toFixed(0)} ms`);
      } while (!over);
      if (slowest >= BYSTANDER_MS) problems.push(`${name}: another tenant's read took ${slowest.toFixed(1)} ms`);
      const answers: Array<Reply<unknown>> = await storm;
      for (const a of answers) if (a.status >= 500) problems.push(`${name}: ${a.status} ${a.text.slice(0, 160)}`);
      // A refusal of every call would not have reached the code under load.
      if (!answers.some((a) => a.status < 300)) problems.push(`${name}: no call succeeded (${answers.map((a) => a.status).join(', ')})`);
    }
    expect(problems).to.deep.equal([]);
  });
});
