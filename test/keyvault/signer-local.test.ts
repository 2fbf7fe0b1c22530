import { keyIdOf, keyRequest, TEST_DEPLOYMENT, TEST_PROJECT } from '../support/keys.js';
import { createDecipheriv } from 'node:crypto';
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { computeAddress } from 'ethers';
import { secp256k1 } from '@noble/curves/secp256k1.js';
import { SignerClient } from '../../src/platform/signer/client.js';
import { AppError } from '../../src/platform/http/errors.js';
import { spawnService } from '../support/process.js';
import { localKeyRecords, SIGNER_MAIN, startSigner, type RunningSigner } from '../support/signer.js';

async function call(s: RunningSigner, method: string, p: string, body?: unknown, token: string | null = s.token) {
  const headers: Record<string, string> = {};
  if (token !== null) headers['authorization'] = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${s.url}${p}`, { method, headers, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

function recordOf(dataDir: string, keyId: string): { ciphertext: string; context: string } {
  const record = localKeyRecords(dataDir).find((r) => r.keyId === keyId);
  if (!record) throw new Error(`no record for ${keyId}`);
  return record;
}

/** Opens a local-backend record with its master key: what only the signer can do. */
function secretOf(dataDir: string, keyId: string): Buffer {
  const record = recordOf(dataDir, keyId);
  const master = Buffer.from(readFileSync(path.join(dataDir, 'master.key'), 'utf8'), 'base64');
  const raw = Buffer.from(record.ciphertext.replace(/^local:v1:/, ''), 'base64');
  const d = createDecipheriv('aes-256-gcm', master, raw.subarray(0, 12));
  d.setAAD(Buffer.from(record.context));
  d.setAuthTag(raw.subarray(raw.length - 16));
  return Buffer.concat([d.update(raw.subarray(12, raw.length - 16)), d.final()]);
}

describe('keyvault: the signer process (local backend)', function () {
  this.timeout(60_000);
  let signer: RunningSigner;
  before(async () => {
    signer = await startSigner();
  });
  after(() => signer.destroy());

  it('refuses requests without the bearer secret', async () => {
    expect((await call(signer, 'POST', '/v1/keys', keyRequest('a'), null)).status).to.equal(401);
    const wrong = await call(signer, 'POST', '/v1/keys', keyRequest('a'), `${signer.token}x`);
    expect(wrong.status).to.equal(401);
    expect(wrong.body).to.deep.include({ code: 'unauthorized', retryable: false });
    expect((await call(signer, 'GET', '/healthz', undefined, null)).status).to.equal(200);
  });

  it('creates a key once per request id (201, then 200 with the same body) and serves its public key', async () => {
    const first = await call(signer, 'POST', '/v1/keys', keyRequest('wallet:once'));
    expect(first.status).to.equal(201);
    expect(first.body).to.have.all.keys('keyId', 'address', 'createdAt');
    const again = await call(signer, 'POST', '/v1/keys', keyRequest('wallet:once'));
    expect(again.status).to.equal(200);
    expect(again.body).to.deep.equal(first.body);
    const got = await call(signer, 'GET', `/v1/keys/${String(first.body['keyId'])}`);
    expect(got.status).to.equal(200);
    expect(computeAddress(String(got.body['publicKey']))).to.equal(first.body['address']);
    // The stored secret is the key of that address.
    const secret = secretOf(signer.dataDir, String(first.body['keyId']));
    expect(computeAddress(`0x${Buffer.from(secp256k1.getPublicKey(secret, false)).toString('hex')}`)).to.equal(first.body['address']);
    expect((await call(signer, 'GET', '/v1/keys/00000000-0000-5000-8000-000000000000')).status).to.equal(404);
  });

  it('answers bad requests with 400 invalid_request', async () => {
    const good = keyRequest('x');
    const derivedId = '5b1d0a3e-6c2f-5f7e-9a41-c3d27e8b6f10';
    for (const body of [
      { requestId: 'x' },
      { ...good, purpose: 'other' },
      { ...good, requestId: '' },
      { ...good, extra: 1 },
      'not json',
      { ...good, requestId: 'x'.repeat(3000) },
      // A key id is a random UUIDv4 the caller chose: no derived (v5) id, none missing, no deployment missing.
      { ...good, keyId: derivedId },
      { ...good, keyId: undefined },
      { ...good, deploymentId: undefined },
      { ...good, deploymentId: 'not-a-uuid' },
    ]) {
      const res = await call(signer, 'POST', '/v1/keys', body);
      expect(res.status, JSON.stringify(body).slice(0, 40)).to.equal(400);
      expect(res.body['code']).to.equal('invalid_request');
    }
    expect((await call(signer, 'GET', '/v1/keys/not-a-key-id')).status).to.equal(400);
    // Over the route's body limit (4 KiB here): 413, unread past the limit.
    const large = await call(signer, 'POST', '/v1/keys', { ...good, requestId: 'x'.repeat(5000) });
    expect(large.status).to.equal(413);
    expect(large.body['code']).to.equal('too_large');
  });

  it('turns 1,000 concurrent creations with 200 distinct request ids into exactly 200 keys', async () => {
    const client = new SignerClient(signer.url, signer.token, 30_000, TEST_DEPLOYMENT);
    const before = localKeyRecords(signer.dataDir).length;
    const results = await Promise.all(
      Array.from({ length: 1000 }, (_, i) => client.createKey(keyIdOf(`burst:${i % 200}`), `burst:${i % 200}`, TEST_PROJECT).then((k) => ({ i, k }))),
    );
    const byRequest = new Map<number, Set<string>>();
    for (const { i, k } of results) {
      const set = byRequest.get(i % 200) ?? new Set<string>();
      set.add(k.address);
      byRequest.set(i % 200, set);
    }
    expect(byRequest.size).to.equal(200);
    for (const addresses of byRequest.values()) expect(addresses.size).to.equal(1);
    expect(results.filter((r) => r.k.created)).to.have.length(200);
    expect(localKeyRecords(signer.dataDir)).to.have.length(before + 200);
    expect(new Set(results.map((r) => r.k.address)).size).to.equal(200);
  });

  it('still returns every address after a restart, and never logs a secret or a ciphertext', async () => {
    const client = new SignerClient(signer.url, signer.token, 10_000, TEST_DEPLOYMENT);
    const made = await Promise.all(Array.from({ length: 20 }, (_, i) => client.createKey(keyIdOf(`restart:${i}`), `restart:${i}`, TEST_PROJECT)));
    const logsBefore = signer.service.output();
    await signer.stop();
    signer = await startSigner({}, { dataDir: signer.dataDir, token: signer.token });
    const after = new SignerClient(signer.url, signer.token, 10_000, TEST_DEPLOYMENT);
    for (const [i, key] of made.entries()) {
      const again = await after.createKey(keyIdOf(`restart:${i}`), `restart:${i}`, TEST_PROJECT);
      expect(again).to.deep.include({ keyId: key.keyId, address: key.address, created: false });
      expect((await after.getKey(key.keyId))?.address).to.equal(key.address);
    }
    const logs = logsBefore + signer.service.output();
    for (const key of made) {
      const record = recordOf(signer.dataDir, key.keyId);
      expect(logs.includes(record.ciphertext.slice(9, 40))).to.equal(false);
      expect(logs.includes(secretOf(signer.dataDir, key.keyId).toString('hex'))).to.equal(false);
      expect(Object.keys(key).sort()).to.deep.equal(['address', 'created', 'createdAt', 'keyId']);
    }
  });

  it('keeps its records in one group-committed log: a second signer on the directory is refused, a torn last line is cut at start, records of the older one-file-per-key layout still count', async () => {
    const client = new SignerClient(signer.url, signer.token, 10_000, TEST_DEPLOYMENT);
    const made = await Promise.all(Array.from({ length: 10 }, (_, i) => client.createKey(keyIdOf(`log:${i}`), `log:${i}`, TEST_PROJECT)));
    // One signer per directory: a second one waits for the lock, then refuses, saying why.
    const second = spawnService(
      { KEYVAULT_TOKEN: signer.token, KEYVAULT_LISTEN: '127.0.0.1:0', KEYVAULT_DATA_DIR: signer.dataDir, KEYVAULT_LOCAL_LOCK_WAIT_MS: '300' },
      SIGNER_MAIN,
    );
    expect(await second.exited).to.equal(1);
    expect(second.output()).to.match(/the local key store in .* is in use by process \d+; run one signer per KEYVAULT_DATA_DIR/);
    expect((await client.createKey(keyIdOf('log:after-refusal'), 'log:after-refusal', TEST_PROJECT)).created).to.equal(true);

    await signer.stop();
    // A crash in the middle of an append: half a record at the end of the log.
    const [moved] = localKeyRecords(signer.dataDir).filter((r) => r.keyId === made[0]?.keyId);
    const lines = readFileSync(path.join(signer.dataDir, 'keys.log'), 'utf8')
      .split('\n')
      .filter((l) => l !== '');
    const kept = lines.filter((l) => !l.includes(`"keyId":"${made[0]?.keyId}"`));
    writeFileSync(path.join(signer.dataDir, 'keys.log'), kept.map((l) => `${l}\n`).join(''));
    appendFileSync(path.join(signer.dataDir, 'keys.log'), '{"keyId":"torn-rec');
    // And one record in the layout of earlier versions (keys/<keyId>.json).
    mkdirSync(path.join(signer.dataDir, 'keys'), { recursive: true });
    writeFileSync(path.join(signer.dataDir, 'keys', `${moved?.keyId}.json`), JSON.stringify(moved));

    signer = await startSigner({}, { dataDir: signer.dataDir, token: signer.token });
    const after = new SignerClient(signer.url, signer.token, 10_000, TEST_DEPLOYMENT);
    for (const [i, key] of made.entries()) {
      expect(await after.createKey(keyIdOf(`log:${i}`), `log:${i}`, TEST_PROJECT)).to.deep.include({ keyId: key.keyId, address: key.address, created: false });
    }
    const fresh = await after.createKey(keyIdOf('log:fresh'), 'log:fresh', TEST_PROJECT);
    expect(fresh.created).to.equal(true);
    // The torn line is gone, the new record follows the last complete one.
    const text = readFileSync(path.join(signer.dataDir, 'keys.log'), 'utf8');
    expect(text).not.to.include('torn-rec');
    expect(text.endsWith('\n')).to.equal(true);
    expect(localKeyRecords(signer.dataDir).at(-1)?.keyId).to.equal(fresh.keyId);
    expect(secretOf(signer.dataDir, fresh.keyId)).to.have.length(32);
  });

  it('maps an unreachable signer to 503 with Retry-After for the API', async () => {
    const client = new SignerClient('http://127.0.0.1:9', signer.token, 2_000, TEST_DEPLOYMENT);
    try {
      await client.createKey(keyIdOf('nowhere'), 'nowhere', TEST_PROJECT);
      expect.fail('should have thrown');
    } catch (err) {
      expect(err).to.be.instanceOf(AppError);
      expect((err as AppError).status).to.equal(503);
      expect((err as AppError).headers['Retry-After']).to.match(/^\d+$/);
    }
    expect((await client.health()).ok).to.equal(false);
  });

  it('refuses the local key store in production, saying why', async () => {
    const svc = spawnService({ APP_ENV: 'production', KEYVAULT_TOKEN: 't'.repeat(40), KEYVAULT_LISTEN: '127.0.0.1:0' }, SIGNER_MAIN);
    expect(await svc.exited).to.equal(1);
    expect(svc.output()).to.include('VAULT_ADDR is required when APP_ENV=production');
  });
});
