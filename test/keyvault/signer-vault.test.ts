import { keyIdOf, keyRequest, TEST_DEPLOYMENT, TEST_PROJECT } from '../support/keys.js';
import { execFileSync } from 'node:child_process';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { computeAddress, verifyMessage } from 'ethers';
import { secp256k1 } from '@noble/curves/secp256k1.js';
import { AppError } from '../../src/platform/http/errors.js';
import { projectUid, SignerClient } from '../../src/platform/signer/client.js';
import { startApp, startAppWithIdp } from '../support/app.js';
import { createOrganisation, createProject } from '../support/factories.js';
import { legacyVersion } from '../support/legacy-signer.js';
import { spawnService } from '../support/process.js';
import { SIGNER_MAIN, startSigner, type RunningSigner } from '../support/signer.js';
import { startDevVault, type DevVault } from '../support/vault.js';

interface KvRecord {
  address: string;
  ciphertext: string;
  context: string;
  keyId: string;
}

describe('keyvault: the signer against a real Vault-API server (server -dev)', function () {
  // First use builds the server binary from the Go module proxy (scripts/openbao.sh); later runs use the cache.
  this.timeout(60_000);
  let vault: DevVault;
  let approle: { VAULT_ROLE_ID: string; VAULT_SECRET_ID: string; VAULT_APPROLE_MOUNT: string };
  let signer: RunningSigner;
  let client: SignerClient;

  const signerEnv = () => ({ VAULT_ADDR: vault.addr, ...approle });
  const kvRecord = (keyId: string): KvRecord =>
    (JSON.parse(vault.cli(['kv', 'get', '-format=json', `custody-kv/custody/keys/${keyId}`])) as { data: { data: KvRecord } }).data.data;
  const decrypt = (r: KvRecord): Buffer => {
    const out = JSON.parse(
      vault.cli(['write', '-format=json', 'custody-transit/decrypt/custody-wallets', `ciphertext=${r.ciphertext}`, `context=${r.context}`]),
    ) as {
      data: { plaintext: string };
    };
    return Buffer.from(out.data.plaintext, 'base64');
  };

  before(async function () {
    this.timeout(45 * 60_000);
    vault = await startDevVault();
    approle = vault.setup();
    expect(approle.VAULT_ROLE_ID).to.have.length.greaterThan(10);
    signer = await startSigner(signerEnv());
    client = new SignerClient(signer.url, signer.token, 15_000, TEST_DEPLOYMENT);
  });
  after(async () => {
    await signer?.destroy();
    await vault?.stop();
  });

  it('refuses to start with a wrongly configured transit key or KV mount, saying what to fix', async () => {
    vault.cli(['write', '-f', 'custody-transit/keys/not-derived']);
    vault.cli(['secrets', 'enable', '-path=kv1', '-version=1', 'kv']);
    const cases: Array<[Record<string, string>, string]> = [
      [{ VAULT_TRANSIT_KEY: 'not-derived' }, 'derived is false, must be true'],
      [{ VAULT_TRANSIT_KEY: 'missing-key' }, 'transit key "missing-key" not found'],
      [{ VAULT_TRANSIT_MOUNT: 'no-such-mount' }, 'not found on mount "no-such-mount"'],
      [{ VAULT_KV_MOUNT: 'nokv' }, 'KV mount "nokv" not found'],
      [{ VAULT_KV_MOUNT: 'kv1' }, 'not a KV version 2 engine'],
    ];
    for (const [env, message] of cases) {
      const svc = spawnService(
        { KEYVAULT_TOKEN: 't'.repeat(40), KEYVAULT_LISTEN: '127.0.0.1:0', VAULT_ADDR: vault.addr, VAULT_TOKEN: vault.rootToken, ...env },
        SIGNER_MAIN,
      );
      expect(await svc.exited, svc.output()).to.equal(1);
      expect(svc.output()).to.include(message);
    }
    const badToken = spawnService(
      { KEYVAULT_TOKEN: 't'.repeat(40), KEYVAULT_LISTEN: '127.0.0.1:0', VAULT_ADDR: vault.addr, VAULT_TOKEN: 'not-a-token' },
      SIGNER_MAIN,
    );
    expect(await badToken.exited).to.equal(1);
    expect(badToken.output()).to.include('refusing to start');
  });

  it('stores each key only as transit ciphertext bound to its key id, in KV v2, and answers with its address', async () => {
    const key = await client.createKey(keyIdOf('vault:first'), 'vault:first', TEST_PROJECT);
    expect(key.created).to.equal(true);
    const record = kvRecord(key.keyId);
    expect(record.address).to.equal(key.address);
    expect(record.ciphertext).to.match(/^vault:v1:/);
    expect(record).not.to.have.property('secret');
    const secret = decrypt(record);
    expect(secret).to.have.length(32);
    expect(computeAddress(`0x${Buffer.from(secp256k1.getPublicKey(secret, false)).toString('hex')}`)).to.equal(key.address);
    // The ciphertext does not open under another record's context.
    expect(() => decrypt({ ...record, context: Buffer.from('another-key-id').toString('base64') })).to.throw();
    const again = await client.createKey(keyIdOf('vault:first'), 'vault:first', TEST_PROJECT);
    expect(again).to.deep.include({ keyId: key.keyId, address: key.address, created: false });
  });

  it('really prevents overwriting a stored key: the signer policy has create and read only', async () => {
    const key = await client.createKey(keyIdOf('vault:overwrite'), 'vault:overwrite', TEST_PROJECT);
    const login = JSON.parse(
      vault.cli(['write', '-format=json', 'auth/custody-approle/login', `role_id=${approle.VAULT_ROLE_ID}`, `secret_id=${approle.VAULT_SECRET_ID}`]),
    ) as { auth: { client_token: string } };
    // The CLI with the signer's own token: what a compromised signer could do.
    const run = (args: string[]) =>
      execFileSync(vault.bin, args, {
        env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/root', VAULT_ADDR: vault.addr, VAULT_TOKEN: login.auth.client_token },
        encoding: 'utf8',
        stdio: 'pipe',
      });
    const path = `custody-kv/custody/keys/${key.keyId}`;
    expect(() => run(['kv', 'put', path, 'address=0x0000000000000000000000000000000000000000'])).to.throw(/permission denied|403/);
    expect(() => run(['kv', 'put', '-cas=1', path, 'address=0x0000000000000000000000000000000000000000'])).to.throw(/permission denied|403/);
    expect(() => run(['kv', 'delete', path])).to.throw(/permission denied|403/);
    expect(() => run(['kv', 'metadata', 'delete', path])).to.throw(/permission denied|403/);
    // It may still create new records and read its own.
    expect(JSON.parse(run(['kv', 'get', '-format=json', path])).data.data.address).to.equal(key.address);
    const meta = JSON.parse(vault.cli(['kv', 'metadata', 'get', '-format=json', path])) as { data: { current_version: number } };
    expect(meta.data.current_version).to.equal(1);
    expect(kvRecord(key.keyId).address).to.equal(key.address);
  });

  it('binds the KV prefix to one deployment: a signer for another refuses to start, naming the owner; the marker cannot be rewritten', async () => {
    await client.bind();
    const marker = JSON.parse(vault.cli(['kv', 'get', '-format=json', 'custody-kv/custody/keys/deployment'])) as { data: { data: { deploymentId: string } } };
    expect(marker.data.data.deploymentId).to.equal(TEST_DEPLOYMENT);
    const other = randomUUID();
    const refused = spawnService(
      { KEYVAULT_TOKEN: 't'.repeat(40), KEYVAULT_LISTEN: '127.0.0.1:0', ...signerEnv(), KEYVAULT_DEPLOYMENT_ID: other },
      SIGNER_MAIN,
    );
    expect(await refused.exited, refused.output()).to.equal(1);
    expect(refused.output()).to.include(`belongs to deployment ${TEST_DEPLOYMENT}, not to deployment ${other}`);
    // Asked over the API, the running signer refuses the other deployment too.
    const foreign = new SignerClient(signer.url, signer.token, 15_000, other);
    try {
      await foreign.createKey(keyIdOf('foreign'), 'foreign', TEST_PROJECT);
      expect.fail('a foreign deployment created a key');
    } catch (err) {
      expect((err as AppError).code).to.equal('key_conflict');
    }
    // A prefix of its own is a store of its own.
    // (The setup's policy covers one prefix: the root token stands in for a second policy.)
    const own = spawnService(
      {
        KEYVAULT_TOKEN: 't'.repeat(40),
        KEYVAULT_LISTEN: '127.0.0.1:0',
        VAULT_ADDR: vault.addr,
        VAULT_TOKEN: vault.rootToken,
        VAULT_KV_PREFIX: 'custody/other/keys',
        KEYVAULT_DEPLOYMENT_ID: other,
      },
      SIGNER_MAIN,
    );
    await own.waitFor(/keyvault listening/, 30_000);
    own.proc.kill('SIGTERM');
    await own.exited;
  });

  it('turns 1,000 concurrent creations with 200 distinct request ids into exactly 200 keys', async () => {
    const list = () => {
      try {
        return JSON.parse(vault.cli(['kv', 'list', '-format=json', 'custody-kv/custody/keys'])) as string[];
      } catch {
        return [];
      }
    };
    const before = list().length;
    const results = await Promise.all(
      Array.from({ length: 1000 }, (_, i) =>
        client.createKey(keyIdOf(`vault-burst:${i % 200}`), `vault-burst:${i % 200}`, TEST_PROJECT).then((k) => ({ i, k })),
      ),
    );
    const perId = new Map<number, Set<string>>();
    for (const { i, k } of results) perId.set(i % 200, (perId.get(i % 200) ?? new Set<string>()).add(k.address));
    expect([...perId.values()].every((s) => s.size === 1)).to.equal(true);
    expect(results.filter((r) => r.k.created)).to.have.length(200);
    expect(list().length - before).to.equal(200);
  });

  it('keeps policy versions beside the keys in KV, write-once, and signs with a key opened by transit only when the policy allows', async () => {
    const call = async (method: string, p: string, body: unknown) => {
      const res = await fetch(`${signer.url}${p}`, {
        method,
        headers: { authorization: `Bearer ${signer.token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const project = randomUUID();
    const created = await call('POST', '/v1/keys', keyRequest('vault:signing', project));
    expect(created.status).to.equal(201);
    const message = { method: 'personal_sign', params: { message: 'app.example.com wants you to sign in' } };
    const denied = await call('POST', `/v1/keys/${keyIdOf('vault:signing')}/sign`, { projectId: project, caller: 'user', operation: message });
    expect(denied.body).to.include({ code: 'policy_denied', policyVersion: 0 });
    const policy = { rules: [{ name: 'any message', action: 'allow', method: 'personal_sign' }] };
    expect((await call('PUT', `/v1/projects/${project}/policy`, { baseVersion: 0, policy })).status).to.equal(201);
    expect((await call('PUT', `/v1/projects/${project}/policy`, { baseVersion: 0, policy: { rules: [] } })).status).to.equal(409);
    const stored = JSON.parse(vault.cli(['kv', 'get', '-format=json', `custody-kv/custody/keys/policies/${project}/v1`])) as {
      data: { data: { body: unknown } };
    };
    expect(stored.data.data.body).to.deep.equal({ projectId: project, version: 1, document: policy });
    const signed = await call('POST', `/v1/keys/${keyIdOf('vault:signing')}/sign`, { projectId: project, caller: 'user', operation: message });
    expect(signed.status, JSON.stringify(signed.body)).to.equal(200);
    expect(verifyMessage(message.params.message, (signed.body['result'] as { signature: string }).signature)).to.equal(created.body['address']);
  });

  it("carries a project's documents of an earlier release over from its numeric id in KV: copies beside the originals, once, never over another document", async () => {
    const call = async (method: string, p: string, body?: unknown) => {
      const res = await fetch(`${signer.url}${p}`, {
        method,
        headers: { authorization: `Bearer ${signer.token}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const owner = { kty: 'EC', crv: 'P-256', x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU', y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0' };
    const policy = { rules: [{ name: 'any message', action: 'allow', method: 'personal_sign' }] };
    // As the earlier release wrote them: KV v2 records under the numeric id, created once.
    const originals = [legacyVersion('policies', 77, 1, policy, 'token:9'), legacyVersion('owners', 77, 1, { keys: [owner] })];
    for (const d of originals) vault.cli(['kv', 'put', '-cas=0', `custody-kv/custody/keys/${d.path}`, '-'], JSON.stringify(d));
    const project = randomUUID();
    const carry = () => call('POST', `/v1/projects/${project}/carry-over/documents`, { deploymentId: TEST_DEPLOYMENT, legacyProjectId: '77' });
    const carried = await carry();
    expect(carried.status, JSON.stringify(carried.body)).to.equal(200);
    expect(carried.body).to.deep.equal({ projectId: project, legacyProjectId: '77', policies: 1, owners: 1 });
    expect((await call('GET', `/v1/projects/${project}/policy`)).body).to.deep.equal({
      projectId: project,
      version: 1,
      policy,
      author: 'token:9',
      createdAt: originals[0]?.createdAt,
    });
    expect((await call('PUT', `/v1/projects/${project}/policy`, { baseVersion: 1, policy })).body['code'], 'the owners apply').to.equal(
      'owner_signature_required',
    );
    const version = (p: string) =>
      (JSON.parse(vault.cli(['kv', 'metadata', 'get', '-format=json', `custody-kv/custody/keys/${p}`])) as { data: { current_version: number } }).data
        .current_version;
    const copy = JSON.parse(vault.cli(['kv', 'get', '-format=json', `custody-kv/custody/keys/policies/${project}/v1`])) as {
      data: { data: { body: { carriedFrom: { path: string; body: unknown } } } };
    };
    expect(copy.data.data.body.carriedFrom).to.deep.equal({ path: 'policies/77/v1', body: originals[0]?.body });
    expect((await carry()).body, 'again: the same').to.deep.equal(carried.body);
    for (const p of ['policies/77/v1', 'owners/77/v1', `policies/${project}/v1`, `owners/${project}/v1`]) expect(version(p), `${p} written once`).to.equal(1);
    const other = randomUUID();
    expect((await call('PUT', `/v1/projects/${other}/policy`, { baseVersion: 0, policy: { rules: [] } })).status).to.equal(201);
    const conflict = await call('POST', `/v1/projects/${other}/carry-over/documents`, { deploymentId: TEST_DEPLOYMENT, legacyProjectId: '77' });
    expect([conflict.status, conflict.body['code']]).to.deep.equal([409, 'carry_over_conflict']);
    expect(version(`policies/${other}/v1`)).to.equal(1);
  });

  it('batches the transit decrypts of concurrent signatures (counted by a proxy in front of Vault)', async () => {
    // A loopback proxy between a signer of its own and Vault, counting transit decrypt calls and their items.
    let calls = 0;
    let items = 0;
    const proxy = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        if (req.url?.includes('/decrypt/')) {
          calls++;
          items += (JSON.parse(body.toString('utf8')) as { batch_input?: unknown[] }).batch_input?.length ?? 1;
        }
        const upstream = httpRequest(new URL(req.url ?? '/', vault.addr), { method: req.method, headers: req.headers }, (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        });
        upstream.end(body);
      });
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const own = await startSigner({
      VAULT_ADDR: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
      VAULT_TOKEN: vault.rootToken,
      VAULT_KV_PREFIX: 'custody/batch-test/keys',
    });
    try {
      const c = new SignerClient(own.url, own.token, 15_000, randomUUID());
      await c.bind();
      const project = projectUid(randomUUID());
      const keys = await Promise.all(Array.from({ length: 24 }, (_, i) => c.createKey(keyIdOf(`batch:${i}`), `batch:${i}`, project)));
      await c.putPolicy(project, { policy: { rules: [{ name: 'any message', action: 'allow', method: 'personal_sign' }] } }, 0, 'test');
      calls = 0;
      items = 0;
      const message = { method: 'personal_sign', params: { message: 'batched' } };
      const signed = await Promise.all(keys.map((k) => c.sign(k.keyId, project, { caller: 'server', operation: message })));
      signed.forEach((s, i) => {
        if (!s.allowed) throw new Error('denied');
        expect(verifyMessage('batched', String(s.result['signature']))).to.equal(keys[i]?.address);
      });
      expect(items, 'one decrypt per signature').to.equal(24);
      // Four calls run at once; what arrives meanwhile shares the next one.
      expect(calls, `${calls} transit calls for 24 concurrent signatures`).to.be.below(24);
    } finally {
      await own.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
  });

  it('returns every address after the signer restarts', async () => {
    const made = await Promise.all(Array.from({ length: 10 }, (_, i) => client.createKey(keyIdOf(`vault-restart:${i}`), `vault-restart:${i}`, TEST_PROJECT)));
    await signer.stop();
    signer = await startSigner(signerEnv(), { dataDir: signer.dataDir, token: signer.token });
    client = new SignerClient(signer.url, signer.token, 15_000, TEST_DEPLOYMENT);
    for (const [i, key] of made.entries()) {
      expect((await client.getKey(key.keyId))?.address).to.equal(key.address);
      expect((await client.createKey(keyIdOf(`vault-restart:${i}`), `vault-restart:${i}`, TEST_PROJECT)).address).to.equal(key.address);
    }
  });

  it('a sealed Vault is not an outage: the signer and the API stay ready, reads and known users work, only key creation and signing answer 503 with Retry-After', async () => {
    // A store of its own, which the app binds to its deployment at start (the suite's signer is
    // bound to the helper's test deployment); the root token stands in for a second policy.
    const own = await startSigner({ VAULT_ADDR: vault.addr, VAULT_TOKEN: vault.rootToken, VAULT_KV_PREFIX: 'custody/sealed-test/keys' });
    const { app, idp, close } = await startAppWithIdp({ KEYVAULT_URL: own.url, KEYVAULT_TOKEN: own.token });
    try {
      const iss = await idp.issuer();
      const org = await createOrganisation(app.client);
      const project = await createProject(app.client, org.id, { issuer: iss.issuer });
      const signin = async (email: string) =>
        app.client.post('/api/v1/signin', { key: project.projectKey }, { token: await iss.sign({ email }, { audience: 'urn:custody:testnet' }) });
      const known = await signin('known@example.com');
      expect(known.status, known.text).to.equal(200);
      expect((await app.client.get('/readyz', { token: null })).body).to.deep.equal({
        status: 'ready',
        checks: { database: 'ok', signer: 'ok', keyStore: 'ok' },
      });
      // A backend that signs with the known user's wallet.
      expect(
        (await app.client.put(`/api/v1/project/${project.id}/policy`, { rules: [{ name: 'any', action: 'allow', method: 'personal_sign' }] })).status,
      ).to.equal(201);
      const minted = await app.client.post(`/api/v1/organisations/${org.id}/tokens`, { name: 'backend', role: 'signer', projectId: project.id });
      const backend = app.client.withToken(minted.body.token);
      const rpc = `/api/v1/project/${project.id}/wallets/${known.body.walletId}/rpc`;
      const hello = { method: 'personal_sign', params: { message: 'hello' } };
      expect((await backend.post(rpc, hello)).status).to.equal(200);
      vault.seal();
      const raw = await fetch(`${signer.url}/v1/keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${signer.token}`, 'content-type': 'application/json' },
        body: JSON.stringify(keyRequest('while-sealed')),
      });
      expect(raw.status).to.equal(503);
      expect(await raw.json()).to.deep.include({ code: 'vault_sealed', retryable: true });
      try {
        await client.createKey(keyIdOf('while-sealed'), 'while-sealed', TEST_PROJECT);
        expect.fail('should have thrown');
      } catch (err) {
        expect(err).to.be.instanceOf(AppError);
        expect((err as AppError).status).to.equal(503);
        expect((err as AppError).headers['Retry-After']).to.match(/^\d+$/);
      }
      // Readiness is what every endpoint needs: the orchestrator keeps both in service.
      expect((await fetch(`${own.url}/readyz`)).status).to.equal(200);
      const ready = await app.client.get('/readyz', { token: null });
      expect(ready.status, ready.text).to.equal(200);
      expect(ready.body.checks).to.deep.equal({ database: 'ok', signer: 'ok', keyStore: 'sealed' });
      // A known user signs in (no key needed); a new user's wallet waits for Vault.
      const again = await signin('known@example.com');
      expect(again.status, again.text).to.equal(200);
      expect(again.body.walletAddress).to.equal(known.body.walletAddress);
      expect((await app.client.get(`/api/v1/organisations/${org.id}`)).status).to.equal(200);
      const fresh = await signin('new-while-sealed@example.com');
      expect(fresh.status, fresh.text).to.equal(503);
      expect(fresh.headers.get('retry-after')).to.match(/^\d+$/);
      expect(fresh.headers.get('content-type')).to.match(/^application\/problem\+json/);
      // Signing needs the key decrypted: 503 with Retry-After, and no decision recorded (none was made).
      const decisions = async () =>
        (await app.client.get(`/api/v1/organisations/${org.id}/audit`)).body.entries.filter((e) => e.action.startsWith('wallet.signature.')).length;
      const before = await decisions();
      const sealedSign = await backend.post(rpc, hello);
      expect(sealedSign.status, sealedSign.text).to.equal(503);
      expect(sealedSign.headers.get('retry-after')).to.match(/^\d+$/);
      expect(await decisions()).to.equal(before);
      vault.unseal();
      expect((await backend.post(rpc, hello)).status, 'signs again once unsealed').to.equal(200);
      expect((await client.createKey(keyIdOf('while-sealed'), 'while-sealed', TEST_PROJECT)).created).to.equal(true);
      const later = await signin('new-while-sealed@example.com');
      expect(later.status, later.text).to.equal(200);
      expect((await app.client.get('/readyz', { token: null })).body.checks.keyStore).to.equal('ok');
    } finally {
      try {
        vault.unseal(); // after a failed assertion while sealed: the next tests need Vault
      } catch {
        // already unsealed
      }
      await close();
      await own.destroy();
    }
  });

  it('never lets a private key or a ciphertext reach the API process or a log', async () => {
    const app = await startApp({ KEYVAULT_URL: signer.url, KEYVAULT_TOKEN: signer.token });
    try {
      const keys = await Promise.all(Array.from({ length: 5 }, (_, i) => client.createKey(keyIdOf(`vault-leak:${i}`), `vault-leak:${i}`, TEST_PROJECT)));
      await app.client.get('/readyz', { token: null });
      const logs = signer.service.output() + app.logs.join('');
      for (const key of keys) {
        expect(Object.keys(key).sort()).to.deep.equal(['address', 'created', 'createdAt', 'keyId']);
        const record = kvRecord(key.keyId);
        const secretHex = decrypt(record).toString('hex');
        expect(logs.includes(secretHex)).to.equal(false);
        expect(logs.includes(record.ciphertext)).to.equal(false);
        expect(logs.includes(record.ciphertext.slice(9))).to.equal(false);
        expect(JSON.stringify(key).includes(record.ciphertext)).to.equal(false);
      }
      expect(logs).not.to.include('vault:v1:');
    } finally {
      await app.close();
    }
  });
});
