import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { verifyMessage } from 'ethers';
import { SignerClient } from '../../src/platform/signer/client.js';
import { keyIdOf, TEST_DEPLOYMENT, TEST_PROJECT } from '../support/keys.js';
import { watchProcess } from '../support/process.js';
import { startSigner, type RunningSigner } from '../support/signer.js';
import { startDevVault, type DevVault } from '../support/vault.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const CLI = path.join(ROOT, 'dist/src/programs/cli/main.js');

interface KvRead {
  data: { address: string; ciphertext: string; context: string; keyId: string };
  metadata: { version: number };
}

describe('keyvault: custody vault rewrap against a real Vault-API server', function () {
  this.timeout(120_000);
  let vault: DevVault;
  let signer: RunningSigner;
  let client: SignerClient;
  let rewrapCreds: Record<string, string>;
  const addresses = new Map<string, string>();
  const KEYS = 24;

  // Over HTTP, not the CLI: a synchronous child process would stall the load's requests in this process.
  const record = async (keyId: string, version?: number): Promise<KvRead> => {
    const res = await fetch(`${vault.addr}/v1/custody-kv/data/custody/keys/${keyId}${version ? `?version=${version}` : ''}`, {
      headers: { 'x-vault-token': vault.rootToken },
    });
    return ((await res.json()) as { data: KvRead }).data;
  };
  const versionOf = (ciphertext: string) => Number(/^vault:v(\d+):/.exec(ciphertext)?.[1]);
  /** `custody vault rewrap` as the chart's Job runs it, in a process group of its own (so that a crash takes the whole pod). */
  const rewrap = (args: string[] = []) => {
    const proc = spawn(process.execPath, [CLI, 'vault', 'rewrap', ...args], {
      env: {
        PATH: process.env['PATH'] ?? '',
        HOME: process.env['HOME'] ?? '/root',
        VAULT_ADDR: vault.addr,
        VAULT_APPROLE_MOUNT: 'custody-approle',
        VAULT_KV_PREFIX: 'custody/keys',
        ...rewrapCreds,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    return watchProcess(proc);
  };
  const summaryOf = (output: string) => JSON.parse(/^\{"latestVersion".*\}$/m.exec(output)?.[0] ?? 'null') as Record<string, unknown> | null;
  const signAll = async (c: SignerClient, message: string) => {
    for (const [keyId, address] of addresses) {
      const signed = await c.sign(keyId, TEST_PROJECT, { caller: 'server', operation: { method: 'personal_sign', params: { message } } });
      expect(signed.allowed, keyId).to.equal(true);
      if (signed.allowed) expect(verifyMessage(message, String(signed.result['signature'])), keyId).to.equal(address);
    }
  };

  before(async function () {
    this.timeout(45 * 60_000);
    vault = await startDevVault();
    const approle = vault.setup();
    const forRewrap = vault.setup({}, 'rewrap');
    rewrapCreds = { VAULT_ROLE_ID: forRewrap.VAULT_ROLE_ID, VAULT_SECRET_ID: forRewrap.VAULT_SECRET_ID };
    expect(rewrapCreds['VAULT_ROLE_ID']).to.not.equal(approle.VAULT_ROLE_ID);
    signer = await startSigner({ VAULT_ADDR: vault.addr, ...approle });
    client = new SignerClient(signer.url, signer.token, 15_000, TEST_DEPLOYMENT);
    await client.putPolicy(TEST_PROJECT, { policy: { rules: [{ name: 'any message', action: 'allow', method: 'personal_sign' }] } }, 0, 'test');
  });
  after(async () => {
    await signer?.destroy();
    await vault?.stop();
  });

  it('moves every record to the newest version, checked; resumes after a crash; a second run moves nothing; signing works throughout and after the old versions are retired', async () => {
    // Keys on three transit versions: v1, v2, and none yet on v3 (the newest).
    for (let i = 0; i < KEYS; i++) {
      if (i === KEYS / 2) vault.cli(['write', '-f', 'custody-transit/keys/custody-wallets/rotate']);
      const key = await client.createKey(keyIdOf(`rewrap-${i}`), `rewrap-${i}`, TEST_PROJECT);
      addresses.set(key.keyId, key.address);
    }
    vault.cli(['write', '-f', 'custody-transit/keys/custody-wallets/rotate']);
    // Signed once each: the running signer keeps the records (and their old ciphertexts).
    await signAll(client, 'before');
    const before = new Map(await Promise.all([...addresses.keys()].map(async (k) => [k, await record(k)] as const)));
    expect(new Set([...before.values()].map((r) => versionOf(r.data.ciphertext)))).to.deep.equal(new Set([1, 2]));

    // Load through everything below, retirement included: signings with every key, none may fail.
    // (No keys are made meanwhile: the runs' counts below are of these records.)
    const load = { stop: false, signed: 0, phase: 'dry run', failures: [] as string[] };
    const loop = async (n: number) => {
      for (let round = 0; !load.stop; round++) {
        const keys = [...addresses.entries()];
        const [keyId, address] = keys[(round * 7 + n) % keys.length] ?? ['', ''];
        try {
          const message = `load ${n} ${round}`;
          const signed = await client.sign(keyId, TEST_PROJECT, { caller: 'server', operation: { method: 'personal_sign', params: { message } } });
          if (!signed.allowed || verifyMessage(message, String(signed.result['signature'])) !== address) load.failures.push(`sign ${keyId}`);
          else load.signed++;
        } catch (err) {
          load.failures.push(`${load.phase} ${keyId}: ${(err as Error).message}`);
        }
      }
    };
    const loops = [loop(0), loop(1), loop(2)];

    const dry = rewrap(['--dry-run']);
    expect(await dry.exited, dry.output()).to.equal(0);
    expect(summaryOf(dry.output())).to.deep.include({ latestVersion: 3, records: KEYS, moved: KEYS, alreadyCurrent: 0, failed: 0 });
    expect(
      (await Promise.all([...addresses.keys()].map((k) => record(k)))).every((r) => r.metadata.version === 1),
      'a dry run writes nothing',
    ).to.equal(true);

    // A crash mid-way: the whole process group killed after a few records, paced so that it is mid-way.
    load.phase = 'crashed run';
    const crashed = rewrap(['--pace-ms', '150']);
    await crashed.waitFor(/rewrap: 5\/24 \S+ v\d -> v3/, 30_000);
    process.kill(-(crashed.proc.pid ?? 0), 'SIGKILL');
    await crashed.exited;
    const movedFirst = (await Promise.all([...addresses.keys()].map((k) => record(k)))).filter((r) => versionOf(r.data.ciphertext) === 3);
    expect(movedFirst.length, crashed.output()).to.be.within(5, KEYS - 5);
    await signAll(client, 'half-way');

    // The next run continues: only the rest moves.
    load.phase = 'resumed run';
    const resumed = rewrap();
    expect(await resumed.exited, resumed.output()).to.equal(0);
    expect(summaryOf(resumed.output())).to.deep.include({
      latestVersion: 3,
      records: KEYS,
      moved: KEYS - movedFirst.length,
      alreadyCurrent: movedFirst.length,
      failed: 0,
    });
    expect(resumed.output()).to.match(/rewrap: 24\/24 /);
    for (const [keyId, address] of addresses) {
      const now = await record(keyId);
      expect(versionOf(now.data.ciphertext), keyId).to.equal(3);
      expect(now.data.address, keyId).to.equal(address);
      // One new KV version, beside the one the signer wrote, which KV keeps.
      expect(now.metadata.version, keyId).to.equal(2);
      expect((await record(keyId, 1)).data).to.deep.equal(before.get(keyId)?.data);
      expect({ ...now.data, ciphertext: '' }).to.deep.equal({ ...before.get(keyId)?.data, ciphertext: '' });
    }

    // A second run: nothing to move, nothing written.
    load.phase = 'second run';
    const again = rewrap();
    expect(await again.exited, again.output()).to.equal(0);
    expect(summaryOf(again.output())).to.deep.include({ records: KEYS, moved: 0, alreadyCurrent: KEYS, failed: 0 });
    expect((await Promise.all([...addresses.keys()].map((k) => record(k)))).every((r) => r.metadata.version === 2)).to.equal(true);

    // Old versions retired: the running signer (holding old ciphertexts) and a fresh one both sign.
    load.phase = 'retirement';
    vault.cli(['write', 'custody-transit/keys/custody-wallets/config', 'min_decryption_version=3']);
    const retired = [...before.values()][0]?.data;
    expect(() => vault.cli(['write', 'custody-transit/decrypt/custody-wallets', `ciphertext=${retired?.ciphertext}`, `context=${retired?.context}`])).to.throw(
      /disallowed by policy/,
    );
    await signAll(client, 'after retirement');
    load.stop = true;
    await Promise.all(loops);
    expect(load.failures, load.failures.join('\n')).to.deep.equal([]);
    expect(load.signed, 'signings under load').to.be.greaterThan(50);
    const fresh = await startSigner({ VAULT_ADDR: vault.addr, ...vault.setup() });
    try {
      await signAll(new SignerClient(fresh.url, fresh.token, 15_000, TEST_DEPLOYMENT), 'fresh signer');
      const created = await new SignerClient(fresh.url, fresh.token, 15_000, TEST_DEPLOYMENT).createKey(keyIdOf('after'), 'after', TEST_PROJECT);
      expect(versionOf((await record(created.keyId)).data.ciphertext)).to.equal(3);
    } finally {
      await fresh.destroy();
    }
  });

  it('refuses to run without Vault, saying why', async () => {
    const proc = spawn(process.execPath, [CLI, 'vault', 'rewrap'], { env: { PATH: process.env['PATH'] ?? '' }, stdio: ['ignore', 'pipe', 'pipe'] });
    const run = watchProcess(proc);
    expect(await run.exited).to.equal(2);
    expect(run.output()).to.include('VAULT_ADDR is required');
  });
});
