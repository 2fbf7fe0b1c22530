import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { compactVerify, createLocalJWKSet, decodeProtectedHeader, type JSONWebKeySet } from 'jose';
import { ChainVerifier } from '../../src/domains/audit/chain.js';
import { SignerClient } from '../../src/platform/signer/client.js';
import { startApp, type TestApp } from '../support/app.js';
import { createTenant } from '../support/factories.js';
import { spawnService } from '../support/process.js';
import { SIGNER_MAIN, startSigner, type RunningSigner } from '../support/signer.js';
import { startDevVault, type DevVault } from '../support/vault.js';
import { until } from '../support/wait.js';

const WALLET = '0x52908400098527886E0F7030069857D2E4169EE7';
const attestationOf = (b: { attestation: string | null }): string => b.attestation ?? expect.fail('no attestation');

describe('keyvault: the service key in Vault transit (server -dev, the shipped setup and policy)', function () {
  this.timeout(120_000);
  let vault: DevVault;
  let approle: ReturnType<DevVault['setup']>;
  let signer: RunningSigner;
  let app: TestApp;

  const jwks = async (): Promise<JSONWebKeySet> => (await (await fetch(`${app.url}/.well-known/jwks.json`)).json()) as JSONWebKeySet;
  const verifies = async (jws: string, set: JSONWebKeySet) => {
    try {
      await compactVerify(jws, createLocalJWKSet(set), { algorithms: ['ES256'] });
      return true;
    } catch {
      return false;
    }
  };

  before(async function () {
    this.timeout(45 * 60_000);
    vault = await startDevVault();
    approle = vault.setup();
    signer = await startSigner({ VAULT_ADDR: vault.addr, ...approle });
    app = await startApp({
      KEYVAULT_URL: signer.url,
      KEYVAULT_TOKEN: signer.token,
      SERVICE_KEYS_CACHE_MS: '0',
      PUBLIC_BASE_URL: 'https://custody.example.com',
    });
  });
  after(async () => {
    await app?.close();
    await signer?.destroy();
    await vault?.stop();
  });

  it('is made by the setup as a P-256 key that cannot be exported, backed up in plain or deleted', () => {
    const key = JSON.parse(vault.cli(['read', '-format=json', 'custody-transit/keys/custody-service'])) as { data: Record<string, unknown> };
    expect(key.data).to.include({ type: 'ecdsa-p256', exportable: false, allow_plaintext_backup: false, deletion_allowed: false });
  });

  it("the signer's policy may sign with it and read its public keys, never export, back up, rotate, configure or delete it", () => {
    const login = JSON.parse(
      vault.cli(['write', '-format=json', 'auth/custody-approle/login', `role_id=${approle.VAULT_ROLE_ID}`, `secret_id=${approle.VAULT_SECRET_ID}`]),
    ) as { auth: { client_token: string; policies: string[] } };
    expect(login.auth.policies).to.include('custody-keyvault-custody');
    const asSigner = (args: string[]) =>
      execFileSync(vault.bin, args, {
        env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/root', VAULT_ADDR: vault.addr, VAULT_TOKEN: login.auth.client_token },
        encoding: 'utf8',
        stdio: 'pipe',
      });
    const signed = JSON.parse(asSigner(['write', '-format=json', 'custody-transit/sign/custody-service', `input=${Buffer.from('x').toString('base64')}`])) as {
      data: { signature: string };
    };
    expect(signed.data.signature).to.match(/^vault:v1:/);
    expect(JSON.parse(asSigner(['read', '-format=json', 'custody-transit/keys/custody-service'])).data.keys['1'].public_key).to.match(/BEGIN PUBLIC KEY/);
    const denied = /permission denied|403/;
    expect(() => asSigner(['read', 'custody-transit/export/signing-key/custody-service'])).to.throw(denied);
    expect(() => asSigner(['read', 'custody-transit/export/signing-key/custody-service/1'])).to.throw(denied);
    expect(() => asSigner(['read', 'custody-transit/backup/custody-service'])).to.throw(denied);
    expect(() => asSigner(['write', '-f', 'custody-transit/keys/custody-service/rotate'])).to.throw(denied);
    expect(() => asSigner(['write', 'custody-transit/keys/custody-service/config', 'deletion_allowed=true'])).to.throw(denied);
    expect(() => asSigner(['write', 'custody-transit/keys/custody-service/config', 'exportable=true'])).to.throw(denied);
    expect(() => asSigner(['delete', 'custody-transit/keys/custody-service'])).to.throw(denied);
    expect(() => asSigner(['write', '-f', 'custody-transit/keys/custody-service/trim', 'min_available_version=1'])).to.throw(denied);
    // Nothing changed: still one version, still not exportable.
    const key = JSON.parse(vault.cli(['read', '-format=json', 'custody-transit/keys/custody-service'])) as { data: Record<string, unknown> };
    expect(key.data).to.include({ latest_version: 1, exportable: false, deletion_allowed: false });
  });

  it('refuses to start with a service key of another type, an exportable one, or none', async () => {
    vault.cli(['write', '-f', 'custody-transit/keys/svc-aes', 'type=aes256-gcm96']);
    vault.cli(['write', '-f', 'custody-transit/keys/svc-ed', 'type=ed25519']);
    vault.cli(['write', '-f', 'custody-transit/keys/svc-exportable', 'type=ecdsa-p256', 'exportable=true']);
    const cases: Array<[string, string]> = [
      ['svc-aes', 'type is "aes256-gcm96", must be "ecdsa-p256"'],
      ['svc-ed', 'type is "ed25519", must be "ecdsa-p256"'],
      ['svc-exportable', 'exportable is true, must be false'],
      ['svc-missing', 'service key "svc-missing" not found'],
    ];
    for (const [name, message] of cases) {
      const svc = spawnService(
        { KEYVAULT_TOKEN: 't'.repeat(40), KEYVAULT_LISTEN: '127.0.0.1:0', VAULT_ADDR: vault.addr, VAULT_TOKEN: vault.rootToken, VAULT_SERVICE_KEY: name },
        SIGNER_MAIN,
      );
      expect(await svc.exited, svc.output()).to.equal(1);
      expect(svc.output()).to.include('refusing to start').and.include(message);
    }
  });

  it('rotation shows in the JWKS without a restart; earlier attestations and checkpoints verify until their version is retired', async () => {
    const t = await createTenant(app.client);
    const issued = await t.projectAdmin.post(`/api/v1/membership/issue?projectId=${t.project.id}`, [{ walletAddress: WALLET, membershipType: 'gym:gold' }]);
    expect(issued.status, issued.text).to.equal(201);
    const check = () => t.projectRead.get(`/api/v1/membership/check?walletAddress=${WALLET}&membershipType=gym:gold`);
    const first = await check();
    expect(first.status, first.text).to.equal(200);
    const before = await jwks();
    expect(before.keys).to.have.length(1);
    // A checkpoint of the audit chain signed before the rotation, as the worker signs it.
    const client = new SignerClient(signer.url, signer.token, 10_000, randomUUID());
    const time = new Date().toISOString();
    const checkpoint = { size: 3, head: 'cd'.repeat(32), time, jws: await client.serviceSign('audit-checkpoint', { size: 3, head: 'cd'.repeat(32), time }) };
    const checkpointVerifies = async (set: JSONWebKeySet) => new ChainVerifier(true).checkpoints([checkpoint], set);
    expect(await checkpointVerifies(before)).to.equal(true);
    expect(await verifies(attestationOf(first.body), before)).to.equal(true);
    expect(decodeProtectedHeader(attestationOf(first.body)).kid).to.equal(before.keys[0]?.kid);

    // An administrator rotates the key in Vault: the signer and the API keep running.
    vault.cli(['write', '-f', 'custody-transit/keys/custody-service/rotate']);
    const after = await until('the new version in the JWKS', async () => {
      const set = await jwks();
      return set.keys.length === 2 && set;
    });
    expect(after.keys.map((k) => k.kid)).to.include(before.keys[0]?.kid);
    const second = await until('an attestation by the new version', async () => {
      const res = await check();
      return decodeProtectedHeader(attestationOf(res.body)).kid !== before.keys[0]?.kid && attestationOf(res.body);
    });
    expect(decodeProtectedHeader(second).kid).to.equal(after.keys[0]?.kid);
    expect(await verifies(second, after)).to.equal(true);
    expect(await verifies(attestationOf(first.body), after), 'the earlier attestation, before its version is retired').to.equal(true);
    expect(await checkpointVerifies(after), 'the earlier checkpoint, before its version is retired').to.equal(true);

    // Retiring version 1: it leaves the JWKS, and what it signed no longer verifies against it.
    vault.cli(['write', 'custody-transit/keys/custody-service/config', 'min_decryption_version=2']);
    const retired = await until('version 1 gone from the JWKS', async () => {
      const set = await jwks();
      return set.keys.length === 1 && set;
    });
    expect(retired.keys[0]?.kid).to.equal(after.keys[0]?.kid);
    expect(await verifies(attestationOf(first.body), retired)).to.equal(false);
    expect(await checkpointVerifies(retired)).to.equal(false);
    expect(await verifies(second, retired)).to.equal(true);
  });
});
