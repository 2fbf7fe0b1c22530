import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { CustodyApiError, CustodyClient, OPERATIONS } from '../../../src/programs/client/index.js';
import { startAppWithIdp, type TestApp } from '../../support/app.js';
import type { TestIdp } from '../../support/idp.js';
import { observeResponse } from '../../support/observed.js';
import type { Receiver } from '../../support/receiver.js';
import { until } from '../../support/wait.js';

const AUDIENCE = 'urn:custody:testnet';

/** fetch that also hands every answer to the end-of-run OpenAPI conformance check. */
const observingFetch: typeof fetch = async (input, init) => {
  const res = await fetch(input, init);
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  observeResponse(init?.method ?? 'GET', url, res, await res.clone().text());
  return res;
};

describe('typed client (src/programs/client)', function () {
  this.timeout(60_000);
  let app: TestApp;
  let idp: TestIdp;
  let receiver: Receiver;
  let close: () => Promise<void>;

  before(async () => {
    ({ app, idp, receiver, close } = await startAppWithIdp());
  });
  after(() => close());

  it('has exactly the operations of the served OpenAPI document (id, method and path), all but the reference files and metrics', async () => {
    const doc = (await (await fetch(`${app.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, { operationId: string }>> };
    const documented = new Map<string, [string, string]>();
    for (const [p, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) documented.set(op.operationId, [method.toUpperCase(), p]);
    }
    for (const id of ['getOpenApi', 'getReferencePage', 'getReferenceAsset', 'getMetrics']) documented.delete(id);
    // The audit export answers NDJSON, not JSON: a method of its own rather than a row of the table.
    expect(documented.get('exportAudit')).to.deep.equal(['GET', '/api/v1/organisations/{id}/audit/export']);
    expect('exportAudit' in CustodyClient.prototype).to.equal(true);
    documented.delete('exportAudit');
    expect(Object.fromEntries(Object.entries(OPERATIONS).map(([id, [m, p]]) => [id, [m, p]]))).to.deep.equal(Object.fromEntries(documented));
  });

  it('drives the whole flow: organisation, project, token, sign-in, verified webhook, membership issue, view, transfer, revoke; problems arrive as CustodyApiError', async () => {
    const operator = new CustodyClient({ baseUrl: app.url, token: app.operatorToken, fetch: observingFetch });
    const org = await operator.createOrganisation('Client Org', { idempotencyKey: 'client-org-1' });
    expect(await operator.createOrganisation('Client Org', { idempotencyKey: 'client-org-1' })).to.deep.equal(org);
    const iss = await idp.issuer('client');
    const project = await operator.createProject(org.id, { name: 'Client project', issuer: iss.issuer, walletWebhookUrl: `${receiver.url}/wallets` });
    expect(project.projectKey).to.match(/^pk_test_/);
    const admin = await operator.createToken(org.id, { name: 'client admin', role: 'admin', projectId: project.id });
    const client = new CustodyClient({ baseUrl: app.url, token: admin.token, fetch: observingFetch });

    const jwt = await iss.sign({ email: 'grace@example.com' }, { audience: AUDIENCE });
    const wallet = await client.signIn(project.projectKey, jwt, 'order-1');
    expect(wallet.isNew).to.equal(true);
    expect((await client.signIn(project.projectKey, jwt)).walletId).to.equal(wallet.walletId);
    expect(await client.getWallet(project.id, wallet.walletId)).to.deep.include({ walletAddress: wallet.walletAddress });
    await until('the wallet-created webhook', () => receiver.received.length >= 1, 20_000);
    const hook = receiver.received[0];
    const verified = new Webhook(project.walletWebhookSecret ?? '').verify(hook?.body ?? '', hook?.headers as Record<string, string>);
    expect(verified).to.deep.equal({ walletId: wallet.walletId, walletAddress: wallet.walletAddress, emailAddress: 'grace@example.com', token: 'order-1' });

    const [issued] = (await client.issueMemberships([{ membershipType: 'gym:gold', walletAddress: wallet.walletAddress, transferable: true }])).memberships;
    expect(issued?.status).to.equal('active');
    const viewed = await client.viewMemberships({ walletAddress: wallet.walletAddress });
    expect(viewed.memberships.map((m) => m.tokenId)).to.deep.equal([issued?.tokenId]);
    const to = '0x000000000000000000000000000000000000dEaD';
    expect((await client.transferMembership({ from: wallet.walletAddress, to, tokenId: issued?.tokenId ?? '' })).walletAddress).to.equal(to);
    expect((await client.revokeMembership({ tokenId: issued?.tokenId ?? '' }))?.status).to.equal('revoked');
    expect(await client.revokeMembership({ tokenId: issued?.tokenId ?? '', hardDelete: true })).to.equal(undefined);

    const all: number[] = [];
    for await (const t of operator.all('tokens', (cursor) => operator.listTokens(org.id, { limit: 1, ...(cursor ? { cursor } : {}) }))) all.push(t.id);
    expect(all).to.include(admin.id);

    // The audit log through its filters, and the chain's status over it.
    const writes = await operator.listAudit(org.id, { actor: 'operator', action: 'POST /api/v1/organisations/:id/', limit: 10 });
    expect(writes.entries.map((e) => e.action)).to.include.members(['POST /api/v1/organisations/:id/projects', 'POST /api/v1/organisations/:id/tokens']);
    for (const e of writes.entries) expect([e.actor, e.action.startsWith('POST /api/v1/organisations/:id/')]).to.deep.equal(['operator', true]);
    expect((await operator.listAudit(org.id, { actor: `token:${admin.id}`, to: '2000-01-01T00:00:00Z' })).entries).to.deep.equal([]);
    const status = await operator.verifyAudit(org.id);
    expect(status.ok).to.equal(true);
    expect(status.rows + status.unsealed).to.be.at.least(writes.entries.length);

    const err = await client.getWallet(project.id, 999_999_999).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(CustodyApiError);
    expect((err as CustodyApiError).status).to.equal(404);
    expect((err as CustodyApiError).problem?.code).to.equal('not_found');
    const bad = await client.signIn('pk_test_nope', jwt).catch((e: unknown) => e);
    expect((bad as CustodyApiError).problem?.code).to.equal('invalid_project_key');
  });
});
