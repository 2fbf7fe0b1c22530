import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { verifyMessage } from 'ethers';
import { PolicyStore } from '../../keyvault/policy/store.js';
import { Signer } from '../../keyvault/signing.js';
import { parseOperation } from '../../keyvault/sign/operation.js';
import { LocalKeyStore } from '../../keyvault/stores/local.js';
import { KeyCreator } from '../../keyvault/create-key.js';
import { generateKey } from '../../keyvault/eth.js';
import { keyIdOf, keyRequest, TEST_DEPLOYMENT } from '../support/keys.js';
import { startSigner, type RunningSigner } from '../support/signer.js';
import { signInMessage as hello, siwePolicy as siwe } from '../support/policies.js';

async function call(s: RunningSigner, method: string, p: string, body?: unknown) {
  const headers: Record<string, string> = { authorization: `Bearer ${s.token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${s.url}${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('keyvault: signing under policy (the signer process, local store)', function () {
  this.timeout(60_000);
  let signer: RunningSigner;
  before(async () => {
    signer = await startSigner();
  });
  after(() => signer.destroy());

  const createKey = async (name: string, projectId?: string) => {
    const r = await call(signer, 'POST', '/v1/keys', { ...keyRequest(name), ...(projectId ? { projectId } : {}) });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return r.body as { keyId: string; address: string };
  };
  const sign = (keyId: string, projectId: string, operation: unknown, caller = 'user') =>
    call(signer, 'POST', `/v1/keys/${keyId}/sign`, { projectId, caller, operation });

  it('signs nothing for a project without a policy: 403 policy_denied, no rule, version 0, with the digest', async () => {
    const key = await createKey('sign:nopolicy', '7');
    const r = await sign(key.keyId, '7', hello);
    expect(r.status).to.equal(403);
    expect(r.body).to.deep.include({ code: 'policy_denied', rule: null, policyVersion: 0, retryable: false });
    expect(r.body['digest']).to.match(/^0x[0-9a-f]{64}$/);
  });

  it('keeps versions of a policy, write-once, over the newest as base; a dry run decides without signing', async () => {
    expect((await call(signer, 'GET', '/v1/projects/11/policy')).status).to.equal(404);
    const first = await call(signer, 'PUT', '/v1/projects/11/policy', { baseVersion: 0, policy: siwe });
    expect(first.status, JSON.stringify(first.body)).to.equal(201);
    expect(first.body).to.include({ projectId: '11', version: 1 });
    const stale = await call(signer, 'PUT', '/v1/projects/11/policy', { baseVersion: 0, policy: { rules: [] } });
    expect(stale.status).to.equal(409);
    expect(stale.body['code']).to.equal('policy_conflict');
    const second = await call(signer, 'PUT', '/v1/projects/11/policy', { baseVersion: 1, policy: { rules: [] } });
    expect(second.body).to.include({ version: 2 });
    expect((await call(signer, 'GET', '/v1/projects/11/policy')).body).to.deep.include({ version: 2, policy: { rules: [] } });
    expect((await call(signer, 'GET', '/v1/projects/11/policy/versions/1')).body).to.deep.include({ version: 1, policy: siwe });
    const bad = await call(signer, 'PUT', '/v1/projects/11/policy', {
      baseVersion: 2,
      policy: { rules: [{ name: 'x', action: 'allow', method: 'personal_sign', conditions: [{ field: 'to', op: 'eq', value: 1 }] }] },
    });
    expect(bad.status).to.equal(400);
    expect(bad.body['code']).to.equal('invalid_policy');
    expect((await call(signer, 'GET', '/v1/projects/11/policy')).body['version'], 'nothing written').to.equal(2);
    await call(signer, 'PUT', '/v1/projects/11/policy', { baseVersion: 2, policy: siwe });
    const dry = await call(signer, 'POST', '/v1/projects/11/policy/evaluate', { caller: 'user', operation: hello });
    expect(dry.body).to.include({ allowed: true, rule: 'sign-in messages', policyVersion: 3 });
    const dryServer = await call(signer, 'POST', '/v1/projects/11/policy/evaluate', { caller: 'server', operation: hello });
    expect(dryServer.body).to.include({ allowed: false, rule: null, policyVersion: 3 });
  });

  it("signs an allowed operation with the project's key; the signature recovers to the key's address", async () => {
    const key = await createKey('sign:allowed', '12');
    await call(signer, 'PUT', '/v1/projects/12/policy', { baseVersion: 0, policy: siwe });
    const r = await sign(key.keyId, '12', hello);
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body).to.include({ policyVersion: 1, rule: 'sign-in messages' });
    const { signature } = r.body['result'] as { signature: string };
    expect(verifyMessage(hello.params.message, signature)).to.equal(key.address);
    const malformed = await sign(key.keyId, '12', { method: 'eth_signTransaction', params: { transaction: { chainId: 0 } } });
    expect(malformed.status).to.equal(400);
    expect(malformed.body['code']).to.equal('invalid_operation');
    const rawHash = await sign(key.keyId, '12', { method: 'eth_sign', params: { hash: `0x${'00'.repeat(32)}` } });
    expect(rawHash.body['code']).to.equal('invalid_operation');
  });

  it("refuses a request naming another project than the key's (wrong_project), whatever that project's policy", async () => {
    const key = await createKey('sign:project13', '13');
    await call(signer, 'PUT', '/v1/projects/14/policy', { baseVersion: 0, policy: siwe });
    const r = await sign(key.keyId, '14', hello);
    expect(r.status).to.equal(403);
    expect(r.body['code']).to.equal('wrong_project');
  });

  it('binds a key created before projects were stored to the first project that uses it, once, across a restart', async () => {
    const key = await createKey('sign:legacy');
    for (const p of ['15', '16']) await call(signer, 'PUT', `/v1/projects/${p}/policy`, { baseVersion: 0, policy: siwe });
    expect((await sign(key.keyId, '15', hello)).status).to.equal(200);
    expect((await sign(key.keyId, '16', hello)).body['code']).to.equal('wrong_project');
    await signer.stop();
    signer = await startSigner({}, { dataDir: signer.dataDir, token: signer.token });
    expect((await sign(key.keyId, '16', hello)).body['code'], 'after a restart').to.equal('wrong_project');
    expect((await sign(key.keyId, '15', hello)).status).to.equal(200);
    expect((await call(signer, 'GET', '/v1/projects/15/policy')).body['version'], 'policies kept too').to.equal(1);
  });
});

describe('keyvault: signing decides before it decrypts (in process, a counting store)', () => {
  it('decrypts once for an allowed operation, never for a denied one, and zeroes the key after signing', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'custody-signing-'));
    const store = new LocalKeyStore(dir);
    try {
      await store.check();
      const opened: Uint8Array[] = [];
      const decrypt = store.decrypt.bind(store);
      store.decrypt = async (context, ciphertext) => {
        const secret = await decrypt(context, ciphertext);
        opened.push(secret);
        return secret;
      };
      const creator = new KeyCreator(store, () => Promise.resolve(generateKey()));
      await creator.create(keyIdOf('inproc'), 'inproc', TEST_DEPLOYMENT, '21');
      opened.length = 0;
      const policies = new PolicyStore(store);
      const signer = new Signer(store, policies);
      const denied = await signer
        .sign({ keyId: keyIdOf('inproc'), projectId: '21', caller: 'user', operation: parseOperation(hello) })
        .catch((e: unknown) => e);
      expect((denied as { code?: string }).code).to.equal('policy_denied');
      expect(opened, 'no decrypt for a denied operation').to.have.length(0);
      await policies.put('21', siwe, 0);
      const signed = await signer.sign({ keyId: keyIdOf('inproc'), projectId: '21', caller: 'user', operation: parseOperation(hello) });
      expect(signed.rule).to.equal('sign-in messages');
      expect(opened).to.have.length(1);
      expect(
        opened[0]?.every((b) => b === 0),
        'zeroed after signing',
      ).to.equal(true);
    } finally {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads policy versions written before owners existed (their document named `policy`)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'custody-signing-'));
    const store = new LocalKeyStore(dir);
    try {
      await store.check();
      await store.putDocumentOnce({ path: 'policies/22/v1', body: { projectId: '22', version: 1, policy: siwe }, createdAt: new Date().toISOString() });
      const latest = await new PolicyStore(store).latest('22');
      expect(latest?.version).to.equal(1);
      expect(latest?.document).to.deep.equal(siwe);
      expect(latest?.value.rules.map((r) => r.name)).to.deep.equal(['sign-in messages']);
    } finally {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
