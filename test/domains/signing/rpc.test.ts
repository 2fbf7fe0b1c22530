import { expect } from 'chai';
import { Transaction, verifyMessage } from 'ethers';
import { parseTransaction, recoverMessageAddress, recoverTransactionAddress, type TransactionSerialized } from 'viem';
import { startAppWithIdp } from '../../support/app.js';
import { createOrganisation, createProject, createToken } from '../../support/factories.js';
import { signInMessage, siwePolicy } from '../../support/policies.js';
import { until } from '../../support/wait.js';

/** A customer's backend signs with its users' wallets, under the project's policy (docs/signing.md). */
const AUDIENCE = 'urn:custody:testnet';

describe("wallets: a backend signs with a user's wallet under the project's policy", function () {
  this.timeout(60_000);
  let env: Awaited<ReturnType<typeof startAppWithIdp>>;
  before(async () => {
    env = await startAppWithIdp();
  });
  after(() => env.close());

  /** A project with a signed-in user's wallet, an admin token and a signer token. */
  async function setup() {
    const { app, idp, receiver } = env;
    const iss = await idp.issuer();
    const org = await createOrganisation(app.client);
    const project = await createProject(app.client, org.id, { issuer: iss.issuer });
    const signin = await app.client.post(
      '/api/v1/signin',
      { key: project.projectKey },
      { token: await iss.sign({ email: 'ada@example.com' }, { audience: AUDIENCE }) },
    );
    expect(signin.status, signin.text).to.equal(200);
    const admin = app.client.withToken((await createToken(app.client, org.id, 'admin', project.id)).token);
    const minted = await app.client.post(`/api/v1/organisations/${org.id}/tokens`, { name: 'backend', role: 'signer', projectId: project.id });
    expect(minted.status, minted.text).to.equal(201);
    const signer = app.client.withToken(minted.body.token);
    const hook = await admin.post(`/api/v1/project/${project.id}/webhooks`, {
      url: `${receiver.url}?p=${project.id}`,
      events: ['wallet.signature.created', 'wallet.signature.denied'],
    });
    expect(hook.status, hook.text).to.equal(201);
    const rpc = `/api/v1/project/${project.id}/wallets/${signin.body.walletId}/rpc` as const;
    const userJwt = (email = 'ada@example.com') => iss.sign({ email }, { audience: AUDIENCE });
    return { org, project, wallet: signin.body, admin, signer, rpc, tokenId: minted.body.id, userJwt };
  }

  it('signs what the policy allows (verified by ethers and viem), refuses what it does not with the rule, and records both decisions', async () => {
    const { org, project, wallet, admin, signer, rpc, tokenId } = await setup();
    const backendMessage = { method: 'personal_sign', params: { message: 'order 4711 approved' } };
    const none = await signer.post(rpc, backendMessage);
    expect(none.status).to.equal(403);
    expect(none.problem.code).to.equal('policy_denied');
    expect(none.problem.detail).to.match(/No rule/);

    const policy = {
      rules: [
        ...siwePolicy.rules,
        { name: 'orders', action: 'allow', method: 'personal_sign', caller: ['server'], conditions: [{ field: 'message', op: 'prefix', value: 'order ' }] },
        {
          name: 'payments on Base',
          action: 'allow',
          method: 'eth_signTransaction',
          conditions: [
            { field: 'chainId', op: 'eq', value: 8453 },
            { field: 'value', op: 'lte', value: '1000' },
          ],
        },
        { name: 'never this order', action: 'deny', method: 'personal_sign', conditions: [{ field: 'message', op: 'eq', value: 'order 13' }] },
      ],
    };
    expect((await admin.put(`/api/v1/project/${project.id}/policy`, policy)).status).to.equal(201);

    const signed = await signer.post(rpc, backendMessage);
    expect(signed.status, signed.text).to.equal(200);
    const signature = (signed.body as { signature: `0x${string}` }).signature;
    expect(verifyMessage(backendMessage.params.message, signature)).to.equal(wallet.walletAddress);
    expect(await recoverMessageAddress({ message: backendMessage.params.message, signature })).to.equal(wallet.walletAddress);

    const tx = {
      chainId: 8453,
      nonce: 0,
      gas: 21000,
      maxFeePerGas: '1000000000',
      maxPriorityFeePerGas: '1000',
      to: '0x0000000000000000000000000000000000000b0b',
      value: '1000',
    };
    const signedTx = await signer.post(rpc, { method: 'eth_signTransaction', params: { transaction: tx } });
    expect(signedTx.status, signedTx.text).to.equal(200);
    const serialized = (signedTx.body as { signedTransaction: TransactionSerialized }).signedTransaction;
    expect(Transaction.from(serialized).from).to.equal(wallet.walletAddress);
    expect(await recoverTransactionAddress({ serializedTransaction: serialized })).to.equal(wallet.walletAddress);
    expect(parseTransaction(serialized).value).to.equal(1000n);

    const tooMuch = await signer.post(rpc, { method: 'eth_signTransaction', params: { transaction: { ...tx, value: '1001' } } });
    expect(tooMuch.status).to.equal(403);
    const denied = await signer.post(rpc, { method: 'personal_sign', params: { message: 'order 13' } });
    expect(denied.status).to.equal(403);
    expect(denied.problem.detail).to.include('"never this order"');
    const userOnly = await signer.post(rpc, signInMessage);
    expect(userOnly.status, 'sign-in messages are for the user present').to.equal(403);

    const audit = await env.app.client.get(`/api/v1/organisations/${org.id}/audit`);
    const decisions = audit.body.entries.filter((e) => e.action.startsWith('wallet.signature.'));
    expect(decisions.map((e) => `${e.action} ${String(e.details['rule'])}`).sort()).to.deep.equal(
      [
        'wallet.signature.created orders',
        'wallet.signature.created payments on Base',
        'wallet.signature.denied never this order',
        'wallet.signature.denied null',
        'wallet.signature.denied null',
        'wallet.signature.denied null',
      ].sort(),
    );
    for (const e of decisions) {
      expect(e.actor).to.equal(`token:${tokenId}`);
      expect(e.details).to.have.all.keys('walletId', 'walletAddress', 'method', 'digest', 'caller', 'rule', 'policyVersion');
      expect(JSON.stringify(e.details), 'no payload in the audit log').to.not.include('order 4711');
    }
    const types = () =>
      env.receiver.received.filter((r) => r.body.includes(`"projectId":${project.id}`)).map((r) => (JSON.parse(r.body) as { type: string }).type);
    const mine = await until('the six decisions as events', () => (types().length >= 6 ? types() : undefined));
    expect(mine.filter((t) => t === 'wallet.signature.created')).to.have.length(2);
    expect(mine.filter((t) => t === 'wallet.signature.denied')).to.have.length(4);
  });

  it('refuses admins, read tokens, wallets of other projects and unreadable operations, and answers a repeated Idempotency-Key with the same signature', async () => {
    const a = await setup();
    const b = await setup();
    await a.admin.put(`/api/v1/project/${a.project.id}/policy`, { rules: [{ name: 'any message', action: 'allow', method: 'personal_sign' }] });
    const message = { method: 'personal_sign', params: { message: 'hello' } };
    const byAdmin = await a.admin.post(a.rpc, message);
    expect(byAdmin.status).to.equal(403);
    expect(byAdmin.problem.detail).to.match(/admin does not imply it/);
    const reader = env.app.client.withToken((await createToken(env.app.client, a.org.id, 'read', a.project.id)).token);
    expect((await reader.post(a.rpc, message)).status, 'a read token').to.equal(403);
    expect((await b.signer.post(a.rpc, message)).status, "another project's wallet").to.equal(404);
    const badOp = await a.signer.post(a.rpc, { method: 'eth_signTransaction', params: { transaction: { chainId: 0 } } });
    expect(badOp.status).to.equal(400);
    expect(badOp.problem.code).to.equal('invalid_operation');
    const rawHash = await a.signer.post(a.rpc, { method: 'eth_sign', params: { hash: `0x${'00'.repeat(32)}` } });
    expect(rawHash.status).to.equal(400);
    const first = await a.signer.post(a.rpc, message, { headers: { 'idempotency-key': 'sign-1' } });
    const again = await a.signer.post(a.rpc, message, { headers: { 'idempotency-key': 'sign-1' } });
    expect(first.status).to.equal(200);
    expect(again.body).to.deep.equal(first.body);
  });

  it("signs again, to the same bytes, when a signature's answer was never stored (its process died) and the lease has ended", async () => {
    const { org, project, admin, signer, rpc } = await setup();
    const policy = {
      rules: [{ name: 'any message', action: 'allow', method: 'personal_sign' }],
      limits: [{ method: 'personal_sign', per: 'wallet', window: '1h', count: 5 }],
    };
    expect((await admin.put(`/api/v1/project/${project.id}/policy`, policy)).status).to.equal(201);
    const message = { method: 'personal_sign', params: { message: 'lost answer' } };
    const headers = { 'idempotency-key': 'lost-1' };
    const first = await signer.post(rpc, message, { headers });
    expect(first.status, first.text).to.equal(200);
    // As a process that died between the signature and storing its answer leaves the record.
    const record = () => env.app.db('idempotency_keys').where({ key: 'lost-1' });
    await record().update({ response_status: null, response_content_type: null, response_body: null });
    expect((await signer.post(rpc, message, { headers })).status, 'while the lease runs').to.equal(409);
    await record().update({ lease_until: env.app.db.raw(`now() - interval '1 second'`) });
    const again = await signer.post(rpc, message, { headers });
    expect(again.status).to.equal(200);
    expect(again.headers.get('idempotent-replayed')).to.equal(null);
    expect(again.body, 'deterministic signatures: nothing new reaches the caller').to.deep.equal(first.body);
    // What it costs: a second limit place and a second decision, both true.
    expect(await env.app.db('wallet_signatures').where({ project_id: project.id })).to.have.length(2);
    const audit = await env.app.client.get(`/api/v1/organisations/${org.id}/audit`);
    const created = audit.body.entries.filter((e) => e.action === 'wallet.signature.created');
    expect(created).to.have.length(2);
    expect(created[0]?.details['digest']).to.equal(created[1]?.details['digest']);
  });

  it('the user present signs with their own wallet (JWT and project key, as sign-in): caller "user" in the policy, audited, idempotent per user', async () => {
    const { org, project, wallet, admin, signer, rpc, userJwt } = await setup();
    await admin.put(`/api/v1/project/${project.id}/policy`, siwePolicy);
    const ada = await userJwt();
    const asUser = (body: unknown, token: string | null = ada, headers: Record<string, string> = {}) =>
      env.app.client.post('/api/v1/wallets/rpc', body, { token, headers });

    const signed = await asUser({ key: project.projectKey, ...signInMessage });
    expect(signed.status, signed.text).to.equal(200);
    const signature = (signed.body as { signature: `0x${string}` }).signature;
    expect(await recoverMessageAddress({ message: signInMessage.params.message, signature })).to.equal(wallet.walletAddress);
    expect(verifyMessage(signInMessage.params.message, signature)).to.equal(wallet.walletAddress);
    // The same rule is for users only: the backend is refused what the user may sign.
    expect((await signer.post(rpc, signInMessage)).status).to.equal(403);
    const other = await asUser({ key: project.projectKey, method: 'personal_sign', params: { message: 'pay 100' } });
    expect(other.status).to.equal(403);
    expect(other.problem.code).to.equal('policy_denied');

    // Refusals, each with its own code, in sign-in's order.
    const noKey = await asUser(signInMessage);
    expect([noKey.status, noKey.problem.code]).to.deep.equal([400, 'missing_project_key']);
    const badKey = await asUser({ key: 'pk_test_nope', ...signInMessage });
    expect([badKey.status, badKey.problem.code]).to.deep.equal([400, 'invalid_project_key']);
    const noJwt = await asUser({ key: project.projectKey, ...signInMessage }, null);
    expect([noJwt.status, noJwt.problem.code]).to.deep.equal([401, 'missing_token']);
    const noWallet = await asUser({ key: project.projectKey, ...signInMessage }, await userJwt('grace@example.com'));
    expect([noWallet.status, noWallet.problem.code]).to.deep.equal([404, 'wallet_not_found']);
    const unknownField = await asUser({ key: project.projectKey, ...signInMessage, walletId: 1 });
    expect(unknownField.status).to.equal(400);

    // Idempotency-Key: the same user and body → the same answer; its records are the user's own.
    const once = await asUser({ key: project.projectKey, ...signInMessage }, ada, { 'idempotency-key': 'u-1' });
    const twice = await asUser({ key: project.projectKey, ...signInMessage }, ada, { 'idempotency-key': 'u-1' });
    expect(twice.headers.get('idempotent-replayed')).to.equal('true');
    expect(twice.body).to.deep.equal(once.body);
    const changed = await asUser({ key: project.projectKey, method: 'personal_sign', params: { message: `${signInMessage.params.message}!` } }, ada, {
      'idempotency-key': 'u-1',
    });
    expect(changed.status, 'another body under the same key').to.equal(422);

    const audit = await env.app.client.get(`/api/v1/organisations/${org.id}/audit`);
    const byUser = audit.body.entries.filter((e) => e.action.startsWith('wallet.signature.') && e.details['caller'] === 'user');
    expect(byUser.map((e) => e.action).sort()).to.deep.equal(['wallet.signature.created', 'wallet.signature.created', 'wallet.signature.denied']);
    for (const e of byUser) expect(e.actor).to.equal(`project:${project.id}`);
  });

  it('a revoked signer token signs nothing', async () => {
    const { org, project, admin, signer, rpc, tokenId } = await setup();
    await admin.put(`/api/v1/project/${project.id}/policy`, { rules: [{ name: 'any message', action: 'allow', method: 'personal_sign' }] });
    const message = { method: 'personal_sign', params: { message: 'hello' } };
    expect((await signer.post(rpc, message)).status).to.equal(200);
    expect((await env.app.client.delete(`/api/v1/organisations/${org.id}/tokens/${tokenId}`)).status).to.equal(204);
    const after = await signer.post(rpc, message);
    expect(after.status).to.equal(401);
  });

  it('rolling-window limits: counted on PostgreSQL across concurrent requests, per wallet; a full limit is named, a rule still wins, the window rolls', async () => {
    const { project, wallet, admin, signer, rpc, userJwt } = await setup();
    const policy = {
      rules: [
        { name: 'any message', action: 'allow', method: 'personal_sign' },
        { name: 'never this', action: 'deny', method: 'personal_sign', conditions: [{ field: 'message', op: 'eq', value: 'no' }] },
      ],
      limits: [{ method: 'personal_sign', per: 'wallet', window: '1h', count: 3 }],
    };
    expect((await admin.put(`/api/v1/project/${project.id}/policy`, policy)).status).to.equal(201);
    // A denial takes no place.
    expect((await signer.post(rpc, { method: 'personal_sign', params: { message: 'no' } })).status).to.equal(403);
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => signer.post(rpc, { method: 'personal_sign', params: { message: `m${i}` } })));
    expect(answers.map((a) => a.status).sort()).to.deep.equal([200, 200, 200, 403, 403, 403]);
    for (const a of answers.filter((x) => x.status === 403)) {
      expect(a.problem.code).to.equal('policy_denied');
      expect(a.problem.detail).to.include('limit: 3 personal_sign per wallet per 1h');
    }
    const ruled = await signer.post(rpc, { method: 'personal_sign', params: { message: 'no' } });
    expect(ruled.problem.detail, 'a rule denies before a limit').to.include('"never this"');
    const rows = await env.app.db('wallet_signatures').where({ wallet_id: wallet.walletId });
    expect(rows).to.have.length(3);

    // Per wallet: another user's wallet of the project has its own places.
    const grace = await userJwt('grace@example.com');
    const other = await env.app.client.post('/api/v1/signin', { key: project.projectKey }, { token: grace });
    const otherRpc = `/api/v1/project/${project.id}/wallets/${other.body.walletId}/rpc`;
    expect((await signer.post(otherRpc, { method: 'personal_sign', params: { message: 'm' } })).status).to.equal(200);

    // The window rolls: signatures older than an hour no longer count.
    await env.app
      .db('wallet_signatures')
      .where({ wallet_id: wallet.walletId })
      .update({ created_at: env.app.db.raw("created_at - interval '61 minutes'") });
    expect((await signer.post(rpc, { method: 'personal_sign', params: { message: 'later' } })).status).to.equal(200);

    // A new version with a per-project limit applies at once (the PUT went through this process): the
    // project's signatures of the last hour (the two just made count) against 3.
    const perProject = { ...policy, limits: [{ method: 'personal_sign', per: 'project', window: '1h', count: 3 }] };
    expect((await admin.put(`/api/v1/project/${project.id}/policy`, perProject)).status).to.equal(201);
    expect((await signer.post(otherRpc, { method: 'personal_sign', params: { message: 'third' } })).status).to.equal(200);
    const full = await signer.post(rpc, { method: 'personal_sign', params: { message: 'fourth' } });
    expect(full.status).to.equal(403);
    expect(full.problem.detail).to.include('limit: 3 personal_sign per project per 1h');
  });

  it('records a signature event only for a project that subscribes to it; the audit entry always', async () => {
    const { org, project, admin, signer, rpc } = await setup();
    await admin.put(`/api/v1/project/${project.id}/policy`, { rules: [{ name: 'any', action: 'allow', method: 'personal_sign' }] });
    const events = () => env.app.db('outbox').where({ project_id: project.id, kind: 'event' }).where('event', 'like', 'wallet.signature.%');
    expect((await signer.post(rpc, { method: 'personal_sign', params: { message: 'subscribed' } })).status).to.equal(200);
    expect(await events()).to.have.length(1);
    // Its only subscription deleted: the next signature is audited, and no event waits for nobody.
    const hooks = await admin.get(`/api/v1/project/${project.id}/webhooks`);
    for (const h of hooks.body.webhooks) expect((await admin.delete(`/api/v1/project/${project.id}/webhooks/${h.id}`)).status).to.equal(204);
    expect((await signer.post(rpc, { method: 'personal_sign', params: { message: 'unsubscribed' } })).status).to.equal(200);
    expect(await events()).to.have.length(1);
    const audit = await env.app.client.get(`/api/v1/organisations/${org.id}/audit`);
    expect(audit.body.entries.filter((e) => e.action === 'wallet.signature.created')).to.have.length(2);
  });
});
