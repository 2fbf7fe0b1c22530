import { expect } from 'chai';
import { DEV_ISSUER } from '../../src/access/auth/dev-idp.js';
import type { Anvil } from './anvil.js';
import type { TestApp } from './app.js';
import { createOrganisation, createProject, createToken } from './factories.js';
import type { Client } from './http.js';
import type { TestIdp, TestIssuer } from './idp.js';
import { SIGN_IN_PREFIX, siwePolicy } from './policies.js';
import type { Receiver } from './receiver.js';

/**
 * A valid call of every declared write endpoint, on a tenant that has what each acts on: the one
 * list the suites that drive every write endpoint share (test/platform/http/pool.test.ts, duplicate names).
 */
const AUDIENCE = 'urn:custody:testnet';
/** Concurrent calls a fixture must be able to make (distinct memberships, names). */
export const WRITE_CALLS = 8;

/** One tenant with everything some write endpoint acts on. */
export interface Tenant {
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
  /** The document's example body of the owners endpoint (a valid owner key). */
  ownersExample: unknown;
  /** The chain its wallet is funded on (writeTenant's `chain`), for the transaction endpoints. */
  chainId: number;
}

/** A call of one endpoint: who sends it, where, with what body. */
export interface Call {
  client: Client;
  path: string;
  body?: unknown;
}

/** How to call each write endpoint validly (the `i`-th of the concurrent calls); `prepare` runs once before. */
export interface Fixture {
  prepare?: (t: Tenant) => Promise<void>;
  call: (t: Tenant, i: number) => Call | Promise<Call>;
}

const OTHER_ADDRESS = '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359';

export const fixtures: Record<string, Fixture> = {
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
  // A project of the tenant's organisation that trusts the development identity provider (with a
  // claim of its own: other organisations of the run trust that issuer too).
  'POST /api/v1/project/:projectId/dev/token': (() => {
    let devProject = 0;
    return {
      prepare: async (t: Tenant) => {
        const res = await t.operator.post(`/api/v1/organisations/${t.orgId}/projects`, {
          name: 'dev tokens',
          issuer: DEV_ISSUER,
          tokenClaim: { name: 'azp', value: `write-fixtures-${t.orgId}` },
        });
        expect(res.status, res.text).to.equal(201);
        devProject = res.body.id;
      },
      call: (t: Tenant, i: number) => ({
        client: t.operator,
        path: `/api/v1/project/${devProject || t.projectId}/dev/token`,
        body: { email: `user${i}@example.com` },
      }),
    };
  })(),
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
  'POST /api/v1/wallets/transactions': {
    call: async (t, i) => ({
      client: await t.user('ada@example.com'),
      path: '/api/v1/wallets/transactions',
      body: { key: t.projectKey, chainId: t.chainId, to: OTHER_ADDRESS, value: String(i + 1) },
    }),
  },
  'POST /api/v1/project/:projectId/wallets/:walletId/transactions': {
    call: (t, i) => ({
      client: t.signer,
      path: `/api/v1/project/${t.projectId}/wallets/${t.walletId}/transactions`,
      body: { chainId: t.chainId, to: OTHER_ADDRESS, value: String(i + 1) },
    }),
  },
  'POST /api/v1/project/:projectId/transactions/:transactionId/cancel': onSentTransaction('cancel'),
  'POST /api/v1/project/:projectId/transactions/:transactionId/speed-up': onSentTransaction('speed-up'),
  'PUT /api/v1/project/:projectId/policy': { call: (t) => ({ client: t.admin, path: `/api/v1/project/${t.projectId}/policy`, body: policy }) },
  'PUT /api/v1/project/:projectId/policy/owners': {
    call: (t) => ({ client: t.admin, path: `/api/v1/project/${t.projectId}/policy/owners`, body: t.ownersExample }),
  },
};

/**
 * Cancel or speed up: one transaction of its own for each concurrent call, sent before (they stay
 * `submitted` on a chain that does not mine: writeTenant's `chain` must not). Without `prepare`
 * (a suite that only needs the path) the call names a transaction that does not exist.
 */
function onSentTransaction(action: 'cancel' | 'speed-up'): Fixture {
  let sent: number[] = [];
  return {
    prepare: async (t) => {
      sent = [];
      for (let i = 0; i < WRITE_CALLS; i++) {
        const res = await t.signer.post(`/api/v1/project/${t.projectId}/wallets/${t.walletId}/transactions`, {
          chainId: t.chainId,
          to: OTHER_ADDRESS,
          value: String(i + 1),
        });
        expect(res.status, res.text).to.equal(202);
        expect(res.body.status, res.text).to.equal('submitted');
        sent.push(res.body.id);
      }
    },
    call: (t, i) => ({ client: t.signer, path: `/api/v1/project/${t.projectId}/transactions/${sent[i] ?? 1}/${action}` }),
  };
}

/**
 * Signs in-app messages for the user and orders for the backend, with a limit, so signing takes a
 * limit place; sends anything (the transaction endpoints' fixtures).
 */
const policy = {
  rules: [
    ...siwePolicy.rules,
    { name: 'orders', action: 'allow', method: 'personal_sign', caller: ['server'], conditions: [{ field: 'message', op: 'prefix', value: 'order ' }] },
    { name: 'sends', action: 'allow', method: 'eth_sendTransaction' },
  ],
  limits: [{ method: 'personal_sign', per: 'wallet', window: '1h', count: 1_000 }],
};

/**
 * A tenant for the fixtures. `chain`: the node the app sends on (its CHAINS), where the tenant's
 * wallet is funded; for the cancel and speed-up fixtures it must not mine (anvil `--no-mining`).
 */
export async function writeTenant(app: TestApp, idp: TestIdp, receiver: Receiver, chain?: Anvil): Promise<Tenant> {
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
    Array.from({ length: WRITE_CALLS }, (_, i) => ({
      membershipType: `held:m${i}`,
      walletAddress: signin.body.walletAddress,
      expiration: 0,
      transferable: true,
    })),
  );
  expect(issued.status, issued.text).to.equal(201);
  if (chain) await chain.fund(signin.body.walletAddress, 10n ** 20n);
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
    ownersExample: ownersExampleOf(app),
    // Without a chain, one the app does not send on: a send is refused (400 unknown_chain).
    chainId: chain?.chainId ?? 1,
  };
}

/** The document's example of the owners endpoint (a valid key), read from its declaration. */
function ownersExampleOf(app: TestApp): unknown {
  return app.endpoints.find((d) => d.route.method === 'PUT' && d.route.path === '/api/v1/project/:projectId/policy/owners')?.schemas.doc?.requestExample;
}
