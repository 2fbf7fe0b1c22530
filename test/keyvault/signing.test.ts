import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
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
import { appendLegacyDocuments, legacyBinding, legacyVersion, writeLegacyKey } from '../support/legacy-signer.js';
import { startSigner, type RunningSigner } from '../support/signer.js';
import type { StoredDocument } from '../../keyvault/stores/types.js';
import { signInMessage as hello, siwePolicy as siwe } from '../support/policies.js';

async function call(s: RunningSigner, method: string, p: string, body?: unknown) {
  const headers: Record<string, string> = { authorization: `Bearer ${s.token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${s.url}${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const signWith = (s: RunningSigner, keyId: string, projectId: string, operation: unknown) =>
  call(s, 'POST', `/v1/keys/${keyId}/sign`, { projectId, caller: 'user', operation });

describe('keyvault: signing under policy (the signer process, local store)', function () {
  this.timeout(60_000);
  let signer: RunningSigner;
  before(async () => {
    signer = await startSigner();
  });
  after(() => signer.destroy());

  const createKey = async (name: string, projectId: string) => {
    const r = await call(signer, 'POST', '/v1/keys', keyRequest(name, projectId));
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return r.body as { keyId: string; address: string };
  };
  const sign = (keyId: string, projectId: string, operation: unknown, caller = 'user') =>
    call(signer, 'POST', `/v1/keys/${keyId}/sign`, { projectId, caller, operation });

  it('signs nothing for a project without a policy: 403 policy_denied, no rule, version 0, with the digest', async () => {
    const project = randomUUID();
    const key = await createKey('sign:nopolicy', project);
    const r = await sign(key.keyId, project, hello);
    expect(r.status).to.equal(403);
    expect(r.body).to.deep.include({ code: 'policy_denied', rule: null, policyVersion: 0, retryable: false });
    expect(r.body['digest']).to.match(/^0x[0-9a-f]{64}$/);
  });

  it('keeps versions of a policy, write-once, over the newest as base; a dry run decides without signing', async () => {
    const project = randomUUID();
    const policy = `/v1/projects/${project}/policy`;
    expect((await call(signer, 'GET', policy)).status).to.equal(404);
    const first = await call(signer, 'PUT', policy, { baseVersion: 0, policy: siwe });
    expect(first.status, JSON.stringify(first.body)).to.equal(201);
    expect(first.body).to.include({ projectId: project, version: 1 });
    const stale = await call(signer, 'PUT', policy, { baseVersion: 0, policy: { rules: [] } });
    expect(stale.status).to.equal(409);
    expect(stale.body['code']).to.equal('policy_conflict');
    const second = await call(signer, 'PUT', policy, { baseVersion: 1, policy: { rules: [] } });
    expect(second.body).to.include({ version: 2 });
    expect((await call(signer, 'GET', policy)).body).to.deep.include({ version: 2, policy: { rules: [] } });
    expect((await call(signer, 'GET', `${policy}/versions/1`)).body).to.deep.include({ version: 1, policy: siwe });
    const bad = await call(signer, 'PUT', policy, {
      baseVersion: 2,
      policy: { rules: [{ name: 'x', action: 'allow', method: 'personal_sign', conditions: [{ field: 'to', op: 'eq', value: 1 }] }] },
    });
    expect(bad.status).to.equal(400);
    expect(bad.body['code']).to.equal('invalid_policy');
    expect((await call(signer, 'GET', policy)).body['version'], 'nothing written').to.equal(2);
    await call(signer, 'PUT', policy, { baseVersion: 2, policy: siwe });
    const dry = await call(signer, 'POST', `${policy}/evaluate`, { caller: 'user', operation: hello });
    expect(dry.body).to.include({ allowed: true, rule: 'sign-in messages', policyVersion: 3 });
    const dryServer = await call(signer, 'POST', `${policy}/evaluate`, { caller: 'server', operation: hello });
    expect(dryServer.body).to.include({ allowed: false, rule: null, policyVersion: 3 });
  });

  it("signs an allowed operation with the project's key; the signature recovers to the key's address", async () => {
    const project = randomUUID();
    const key = await createKey('sign:allowed', project);
    await call(signer, 'PUT', `/v1/projects/${project}/policy`, { baseVersion: 0, policy: siwe });
    const r = await sign(key.keyId, project, hello);
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body).to.include({ policyVersion: 1, rule: 'sign-in messages' });
    const { signature } = r.body['result'] as { signature: string };
    expect(verifyMessage(hello.params.message, signature)).to.equal(key.address);
    const malformed = await sign(key.keyId, project, { method: 'eth_signTransaction', params: { transaction: { chainId: 0 } } });
    expect(malformed.status).to.equal(400);
    expect(malformed.body['code']).to.equal('invalid_operation');
    const rawHash = await sign(key.keyId, project, { method: 'eth_sign', params: { hash: `0x${'00'.repeat(32)}` } });
    expect(rawHash.body['code']).to.equal('invalid_operation');
  });

  it("refuses a request naming another project than the key's (wrong_project), whatever that project's policy", async () => {
    const [mine, other] = [randomUUID(), randomUUID()];
    const key = await createKey('sign:project-mine', mine);
    await call(signer, 'PUT', `/v1/projects/${other}/policy`, { baseVersion: 0, policy: siwe });
    const r = await sign(key.keyId, other, hello);
    expect(r.status).to.equal(403);
    expect(r.body['code']).to.equal('wrong_project');
    // The same creation request for another project is no retry of it.
    const again = await call(signer, 'POST', '/v1/keys', keyRequest('sign:project-mine', other));
    expect([again.status, again.body['code']]).to.deep.equal([409, 'key_conflict']);
    expect((await call(signer, 'POST', '/v1/keys', keyRequest('sign:project-mine', mine))).body).to.include({ keyId: key.keyId, address: key.address });
  });

  it('creates no key without a project (400 project_required), nor for a numeric project id, and stores nothing', async () => {
    const withoutProject: Record<string, unknown> = { ...keyRequest('sign:no-project') };
    delete withoutProject['projectId'];
    const refused = await call(signer, 'POST', '/v1/keys', withoutProject);
    expect([refused.status, refused.body['code']]).to.deep.equal([400, 'project_required']);
    for (const numeric of ['7', 7, '0007']) {
      const r = await call(signer, 'POST', '/v1/keys', { ...keyRequest('sign:numeric-project'), projectId: numeric });
      expect([r.status, r.body['code']], JSON.stringify(numeric)).to.deep.equal([400, 'invalid_request']);
    }
    expect((await call(signer, 'GET', `/v1/keys/${keyIdOf('sign:no-project')}`)).status).to.equal(404);
    expect((await call(signer, 'GET', `/v1/keys/${keyIdOf('sign:numeric-project')}`)).status).to.equal(404);
  });

  it('refuses a numeric project id on every route that names a project, before anything is read or written', async () => {
    const key = await createKey('sign:numeric-routes', randomUUID());
    const deploymentId = keyRequest('x').deploymentId;
    const routes: Array<[string, string, unknown?]> = [
      ['GET', '/policy'],
      ['PUT', '/policy', { baseVersion: 0, policy: siwe }],
      ['GET', '/policy/versions'],
      ['GET', '/policy/versions/1'],
      ['POST', '/policy/evaluate', { caller: 'user', operation: hello }],
      ['GET', '/owners'],
      ['PUT', '/owners', { baseVersion: 0, owners: { keys: [] } }],
      ['POST', '/carry-over/documents', { deploymentId, legacyProjectId: '5' }],
      ['POST', '/carry-over/keys', { deploymentId, legacyProjectId: '5', keyIds: [key.keyId] }],
      ['GET', '/anything-else'],
    ];
    for (const [method, rest, body] of routes) {
      const r = await call(signer, method, `/v1/projects/5${rest}`, body);
      expect([r.status, r.body['code']], `${method} /v1/projects/5${rest}`).to.deep.equal([400, 'invalid_request']);
      expect(String(r.body['message'])).to.include('numeric project id');
    }
    const signed = await sign(key.keyId, '5', hello);
    expect([signed.status, signed.body['code']]).to.deep.equal([400, 'invalid_request']);
  });
});

describe('keyvault: keys and documents of earlier releases (the signer process, local store)', function () {
  this.timeout(60_000);
  let signer: RunningSigner | undefined;
  afterEach(() => signer?.destroy());

  /** A store as an earlier release left it (its keys, then its documents), and the signer on it. */
  async function signerOn(keys: (store: LocalKeyStore) => Promise<void>, documents: StoredDocument[] = []): Promise<RunningSigner> {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'custody-legacy-'));
    const store = new LocalKeyStore(dataDir, 0);
    await store.check();
    await keys(store);
    store.close();
    rmSync(path.join(dataDir, 'keys.lock'), { force: true });
    appendLegacyDocuments(dataDir, documents);
    signer = await startSigner({}, { dataDir, token: randomUUID() });
    return signer;
  }
  const carryKeys = (s: RunningSigner, project: string, legacyProjectId: string, keyIds: string[]) =>
    call(s, 'POST', `/v1/projects/${project}/carry-over/keys`, { deploymentId: TEST_DEPLOYMENT, legacyProjectId, keyIds });

  it('a key made without a project, or for a numeric id, signs for no project (403 key_unbound) until a carry-over binds it: then for that project only, across a restart', async () => {
    const keys = { none: keyIdOf('legacy:none'), numeric: keyIdOf('legacy:numeric'), firstUse: keyIdOf('legacy:first-use') };
    const s = await signerOn(
      async (store) => {
        await writeLegacyKey(store, keys.none, 'wallet:1');
        await writeLegacyKey(store, keys.numeric, 'wallet:2', '15');
        await writeLegacyKey(store, keys.firstUse, 'wallet:3');
      },
      // The first-use binding an earlier release made when the key first signed, for project 15.
      [legacyBinding(keys.firstUse, 15)],
    );
    const [p15, p16] = [randomUUID(), randomUUID()];
    for (const p of [p15, p16]) await call(s, 'PUT', `/v1/projects/${p}/policy`, { baseVersion: 0, policy: siwe });
    for (const keyId of Object.values(keys)) {
      for (const p of [p15, p16]) {
        const r = await signWith(s, keyId, p, hello);
        expect([r.status, r.body['code']], 'nobody binds it by asking first').to.deep.equal([403, 'key_unbound']);
      }
    }
    // The API's records: every key is project 15's (numeric), now p15. The first-use binding and the record agree.
    const bound = await carryKeys(s, p15, '15', Object.values(keys));
    expect(bound.status, JSON.stringify(bound.body)).to.equal(200);
    expect((bound.body['keys'] as Array<{ outcome: string }>).map((k) => k.outcome)).to.deep.equal(['bound', 'bound', 'bound']);
    await s.stop();
    const restarted = await startSigner({}, { dataDir: s.dataDir, token: s.token });
    signer = restarted;
    for (const keyId of Object.values(keys)) {
      expect((await signWith(restarted, keyId, p15, hello)).status, 'its project').to.equal(200);
      expect((await signWith(restarted, keyId, p16, hello)).body['code'], 'another').to.equal('wrong_project');
    }
    // Again: the same answer, nothing new written; to another project: refused, nothing changed.
    const again = await carryKeys(restarted, p15, '15', Object.values(keys));
    expect((again.body['keys'] as Array<{ outcome: string }>).map((k) => k.outcome)).to.deep.equal(['bound', 'bound', 'bound']);
    const elsewhere = await carryKeys(restarted, p16, '16', [keys.none]);
    expect(elsewhere.body['keys']).to.deep.equal([
      { keyId: keys.none, outcome: 'refused', code: 'wrong_project', message: 'the key is bound to another project' },
    ]);
    expect((await signWith(restarted, keys.none, p15, hello)).status).to.equal(200);
  });

  it('binds no key against what its earlier release recorded, and says which keys it does not hold', async () => {
    const keys = {
      numeric: keyIdOf('legacy:numeric-15'),
      firstUse: keyIdOf('legacy:first-use-15'),
      fresh: keyIdOf('legacy:made-now'),
      missing: keyIdOf('legacy:missing'),
    };
    const madeNowFor = randomUUID();
    const s = await signerOn(
      async (store) => {
        await writeLegacyKey(store, keys.numeric, 'wallet:1', '15');
        await writeLegacyKey(store, keys.firstUse, 'wallet:2');
      },
      [legacyBinding(keys.firstUse, 15)],
    );
    expect((await call(s, 'POST', '/v1/keys', keyRequest('legacy:made-now', madeNowFor))).status).to.equal(201);
    const p16 = randomUUID();
    const r = await carryKeys(s, p16, '16', Object.values(keys));
    expect(r.body['keys']).to.deep.equal([
      { keyId: keys.numeric, outcome: 'refused', code: 'wrong_project', message: 'the key was created for project 15, not 16' },
      {
        keyId: keys.firstUse,
        outcome: 'refused',
        code: 'wrong_project',
        message: 'an earlier release bound the key to project 15 at its first use, not to 16',
      },
      { keyId: keys.fresh, outcome: 'refused', code: 'wrong_project', message: 'the key is bound to another project' },
      { keyId: keys.missing, outcome: 'absent' },
    ]);
    for (const keyId of [keys.numeric, keys.firstUse]) expect((await signWith(s, keyId, p16, hello)).body['code']).to.equal('key_unbound');
    const other = await call(s, 'POST', `/v1/projects/${p16}/carry-over/keys`, { deploymentId: randomUUID(), legacyProjectId: '16', keyIds: [keys.numeric] });
    expect([other.status, other.body['code']], "another deployment's carry-over").to.deep.equal([409, 'store_owned']);
  });

  it("carries a project's documents over from its numeric id: copies with the originals inside, idempotent, never over another document", async () => {
    const alice = { kty: 'EC', crv: 'P-256', x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU', y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0' };
    const originals = [
      legacyVersion('policies', 21, 1, { rules: [] }),
      // Written before owners existed: the document is named `policy`.
      { ...legacyVersion('policies', 21, 2, siwe), body: { projectId: '21', version: 2, policy: siwe, author: 'token:3' } },
      legacyVersion('owners', 21, 1, { keys: [alice] }, 'token:3'),
      legacyVersion('policies', 22, 1, { rules: [] }),
    ];
    const s = await signerOn(() => Promise.resolve(), originals);
    const p21 = randomUUID();
    const before = await call(s, 'GET', `/v1/projects/${p21}/policy`);
    expect(before.status, 'nothing under the uid yet').to.equal(404);
    const carry = (project: string, legacyProjectId: string) =>
      call(s, 'POST', `/v1/projects/${project}/carry-over/documents`, { deploymentId: TEST_DEPLOYMENT, legacyProjectId });
    const carried = await carry(p21, '21');
    expect(carried.status, JSON.stringify(carried.body)).to.equal(200);
    expect(carried.body).to.deep.equal({ projectId: p21, legacyProjectId: '21', policies: 2, owners: 1 });
    const latest = await call(s, 'GET', `/v1/projects/${p21}/policy`);
    expect(latest.body).to.deep.equal({ projectId: p21, version: 2, policy: siwe, author: 'token:3', createdAt: originals[1]?.createdAt });
    expect((await call(s, 'GET', `/v1/projects/${p21}/policy/versions/1`)).body).to.deep.include({ version: 1, policy: { rules: [] }, author: null });
    expect((await call(s, 'GET', `/v1/projects/${p21}/owners`)).body).to.deep.include({ version: 1, keys: [alice], author: 'token:3' });
    // The owners apply under the uid: an admin's plain write is refused.
    expect((await call(s, 'PUT', `/v1/projects/${p21}/policy`, { baseVersion: 2, policy: { rules: [] } })).body['code']).to.equal('owner_signature_required');
    const log = () => readFileSync(path.join(s.dataDir, 'documents.log'), 'utf8');
    const written = log();
    for (const original of originals.slice(0, 3)) {
      const copy = written
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as { path: string; body: { carriedFrom?: { path: string; body: unknown } } })
        .find((d) => d.body.carriedFrom?.path === original.path);
      expect(copy?.path).to.equal(original.path.replace('/21/', `/${p21}/`));
      expect(copy?.body.carriedFrom?.body, 'the original body, unchanged').to.deep.equal(original.body);
    }
    expect(
      written
        .split('\n')
        .filter((l) => l !== '')
        .slice(0, originals.length),
      'the originals stay',
    ).to.deep.equal(originals.map((d) => JSON.stringify(d)));
    // Again: the same answer, not a byte written.
    expect((await carry(p21, '21')).body).to.deep.equal(carried.body);
    expect(log()).to.equal(written);
    // Project 22's documents where project 21's copies are: refused, nothing overwritten.
    const conflict = await carry(p21, '22');
    expect([conflict.status, conflict.body['code']]).to.deep.equal([409, 'carry_over_conflict']);
    expect(log()).to.equal(written);
    const p22 = randomUUID();
    expect((await call(s, 'PUT', `/v1/projects/${p22}/policy`, { baseVersion: 0, policy: siwe })).status).to.equal(201);
    expect((await carry(p22, '22')).body['code'], 'a version written under the uid first').to.equal('carry_over_conflict');
    expect((await call(s, 'GET', `/v1/projects/${p22}/policy`)).body).to.deep.include({ version: 1, policy: siwe });
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
      const project = randomUUID();
      await creator.create(keyIdOf('inproc'), 'inproc', TEST_DEPLOYMENT, project);
      opened.length = 0;
      const policies = new PolicyStore(store);
      const signer = new Signer(store, policies);
      const denied = await signer
        .sign({ keyId: keyIdOf('inproc'), projectId: project, caller: 'user', operation: parseOperation(hello) })
        .catch((e: unknown) => e);
      expect((denied as { code?: string }).code).to.equal('policy_denied');
      expect(opened, 'no decrypt for a denied operation').to.have.length(0);
      await policies.put(project, siwe, 0);
      const signed = await signer.sign({ keyId: keyIdOf('inproc'), projectId: project, caller: 'user', operation: parseOperation(hello) });
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

  it('writes no document under a numeric project id, nor a first-use binding: the store refuses the paths of earlier releases', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'custody-signing-'));
    const store = new LocalKeyStore(dir);
    try {
      await store.check();
      const at = new Date().toISOString();
      for (const doc of [legacyVersion('policies', 22, 1, siwe), legacyVersion('owners', 22, 1, { keys: [] }), legacyBinding(keyIdOf('inproc'), 22)]) {
        const refused = await store.putDocumentOnce(doc).catch((e: unknown) => e);
        expect((refused as { code?: string }).code, doc.path).to.equal('invalid_request');
      }
      expect(await store.putDocumentOnce({ path: `policies/${randomUUID()}/v1`, body: {}, createdAt: at })).to.equal('created');
      const numeric = await new PolicyStore(store).latest('22').catch((e: unknown) => e);
      expect(String((numeric as Error).message)).to.include('project identity');
    } finally {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
