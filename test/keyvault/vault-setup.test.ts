import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { verifyMessage } from 'ethers';
import { parse as parseYaml } from 'yaml';
import { SignerClient } from '../../src/platform/signer/client.js';
import { createCa } from '../support/idp.js';
import { keyIdOf, TEST_DEPLOYMENT, TEST_PROJECT } from '../support/keys.js';
import { spawnService } from '../support/process.js';
import { SIGNER_MAIN, startSigner } from '../support/signer.js';
import { startDevVault, type DevVault } from '../support/vault.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The shell blocks of docs/operations.md marked `<!-- tested: vault-setup -->`, verbatim. */
function documentedSetupBlocks(): string[] {
  const doc = readFileSync(path.join(ROOT, 'docs/operations.md'), 'utf8');
  return [...doc.matchAll(/<!-- tested: vault-setup -->\n```sh\n([\s\S]*?)```/g)].map((m) => m[1] ?? '');
}

describe('keyvault: the documented Vault setup on a Vault that serves another team', function () {
  this.timeout(120_000);
  let vault: DevVault;
  let work: string;
  const run = (script: string, env: Record<string, string> = {}) =>
    spawnSync('bash', ['-euo', 'pipefail', '-c', script], {
      cwd: work,
      encoding: 'utf8',
      env: {
        PATH: `${path.dirname(vault.bin)}:${process.env['PATH'] ?? ''}`,
        HOME: process.env['HOME'] ?? '/root',
        VAULT_ADDR: vault.addr,
        VAULT_TOKEN: vault.rootToken,
        ...env,
      },
    });
  /** A CLI command's JSON answer: `-format=json` goes before the command's arguments. */
  const json = (args: string[]) => {
    const words = args[0] === 'kv' || args[0] === 'secrets' || args[0] === 'auth' ? 2 : 1;
    return JSON.parse(vault.cli([...args.slice(0, words), '-format=json', ...args.slice(words)])) as { data?: Record<string, unknown> } & Record<
      string,
      unknown
    >;
  };

  /** Everything of the other team's that the setup must leave as it was. */
  const otherTeam = () => {
    const mounts = json(['secrets', 'list']);
    const auths = json(['auth', 'list']);
    const pick = (list: Record<string, unknown>, names: string[]) => Object.fromEntries(names.map((n) => [n, list[n]]));
    return {
      mounts: pick(mounts, ['transit/', 'secret/']),
      auths: pick(auths, ['kubernetes/', 'approle/']),
      transitConfig: json(['read', 'transit/config/keys']).data,
      transitKey: json(['read', 'transit/keys/other-app']).data,
      kvConfig: json(['read', 'secret/config']).data,
      k8sConfig: json(['read', 'auth/kubernetes/config']).data,
      approleRole: json(['read', 'auth/approle/role/other']).data,
      policy: vault.cli(['policy', 'read', 'other-team']),
    };
  };

  before(async function () {
    // First use builds the server binary from the Go module proxy (scripts/openbao.sh).
    this.timeout(45 * 60_000);
    vault = await startDevVault();
    work = mkdtempSync(path.join(tmpdir(), 'custody-vault-setup-'));
    symlinkSync(path.join(ROOT, 'scripts'), path.join(work, 'scripts'));
    // The files the documented commands for a Vault outside the cluster read.
    writeFileSync(path.join(work, 'k8s-ca.crt'), (await createCa('kubernetes API CA')).certPem);
    writeFileSync(path.join(work, 'reviewer.jwt'), 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ2YXVsdC1yZXZpZXdlciJ9.c2lnbmF0dXJl');
    // Another team's Vault: transit with implicit key creation, KV v2 keeping 5 versions,
    // Kubernetes auth for their cluster, an AppRole, a policy.
    vault.cli(['secrets', 'enable', 'transit']);
    vault.cli(['write', '-f', 'transit/keys/other-app']);
    vault.cli(['write', 'transit/config/keys', 'disable_upsert=false']);
    vault.cli(['write', 'secret/config', 'max_versions=5', 'delete_version_after=720h']);
    vault.cli(['auth', 'enable', 'kubernetes']);
    vault.cli([
      'write',
      'auth/kubernetes/config',
      'kubernetes_host=https://other-cluster.example:6443',
      `kubernetes_ca_cert=@${path.join(work, 'k8s-ca.crt')}`,
    ]);
    vault.cli(['auth', 'enable', 'approle']);
    vault.cli(['write', 'auth/approle/role/other', 'token_policies=other-team', 'secret_id_ttl=0']);
    vault.cli(['policy', 'write', 'other-team', '-'], 'path "secret/data/other/*" { capabilities = ["read"] }\n');
  });
  after(async () => {
    await vault?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('runs every documented command, twice, without changing anything of the other team; the signer starts on what it made and creates a key', async () => {
    const blocks = documentedSetupBlocks();
    expect(blocks, 'in-cluster Kubernetes, external Kubernetes, AppRole').to.have.length(3);
    const before = otherTeam();
    for (const pass of [1, 2]) {
      for (const block of blocks) {
        // The documented pod CIDR, as loopback: this test's signer logs in from 127.0.0.1. And this
        // Vault is not in a cluster: the CA an in-cluster Vault reads from its own pod comes from
        // the environment (the blocks that name K8S_CA_CERT themselves set it anyway).
        const res = run(block.replace('APPROLE_BOUND_CIDRS=10.42.0.0/16', 'APPROLE_BOUND_CIDRS=127.0.0.1/32'), { K8S_CA_CERT: 'k8s-ca.crt' });
        expect(res.status, `pass ${pass}:\n${block}\n${res.stderr}`).to.equal(0);
      }
    }
    expect(otherTeam()).to.deep.equal(before);

    // What it made: dedicated, marked mounts with the settings the signer checks.
    const mounts = json(['secrets', 'list']);
    expect(mounts['custody-transit/']).to.deep.include({ type: 'transit', description: 'custody signer (release custody)' });
    expect(mounts['custody-kv/']).to.deep.include({ type: 'kv', description: 'custody signer (release custody)' });
    expect(json(['read', 'custody-transit/config/keys']).data).to.deep.include({ disable_upsert: true });
    expect(json(['read', 'custody-kv/config']).data).to.deep.include({ max_versions: 0, delete_version_after: '0s' });
    const role = json(['read', 'auth/custody-kubernetes/role/custody-keyvault']).data ?? {};
    expect(role['bound_service_account_names']).to.deep.equal(['custody-keyvault']);
    expect(role['bound_service_account_namespaces']).to.deep.equal(['custody']);
    expect(role['audience']).to.equal('vault');
    expect(json(['read', 'auth/custody-kubernetes/config']).data).to.deep.include({ kubernetes_host: 'https://k8s-api.example.internal:6443' });
    const approle = json(['read', 'auth/custody-approle/role/custody-keyvault']).data ?? {};
    expect(approle['secret_id_ttl']).to.equal(720 * 3600);
    expect(approle['secret_id_bound_cidrs']).to.deep.equal(['127.0.0.1/32']);

    // The AppRole output is the Secret the chart reads, under the chart's default keys.
    const values = parseYaml(readFileSync(path.join(ROOT, 'helm/custody/values.yaml'), 'utf8')) as {
      signer: { vault: { approle: { roleIdKey: string; secretIdKey: string } } };
    };
    const creds = Object.fromEntries(
      readFileSync(path.join(work, 'approle.env'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    expect(Object.keys(creds).sort()).to.deep.equal([values.signer.vault.approle.secretIdKey, values.signer.vault.approle.roleIdKey].sort());

    // The signer as the chart runs it for release `custody`: mount defaults, its prefix, the AppRole
    // mount, and the credentials as files read through *_FILE (the chart's secretsAsFiles).
    for (const [name, value] of Object.entries(creds)) writeFileSync(path.join(work, name), `${value}\n`, { mode: 0o440 });
    const signer = await startSigner({
      VAULT_ADDR: vault.addr,
      VAULT_ROLE_ID_FILE: path.join(work, 'VAULT_ROLE_ID'),
      VAULT_SECRET_ID_FILE: path.join(work, 'VAULT_SECRET_ID'),
      VAULT_APPROLE_MOUNT: 'custody-approle',
      VAULT_KV_PREFIX: 'custody/custody/keys',
    });
    try {
      const client = new SignerClient(signer.url, signer.token, 15_000, TEST_DEPLOYMENT);
      const key = await client.createKey(keyIdOf('documented-setup'), 'documented-setup', TEST_PROJECT);
      expect(key.created).to.equal(true);
      const record = json(['kv', 'get', `custody-kv/custody/custody/keys/${key.keyId}`]).data as { data: { address: string } };
      expect(record.data.address).to.equal(key.address);
    } finally {
      await signer.destroy();
    }
  });

  it('rotates the AppRole secret id leaving one live id; the signer reports its expiry; a login from outside the bound CIDRs says what to do', async () => {
    const release = { RELEASE: 'rotation', TRANSIT_MOUNT: 'rotation-transit', KV_MOUNT: 'rotation-kv', APPROLE_MOUNT: 'rotation-approle', AUTH: 'approle' };
    const rotate = (cidrs: string) => {
      const res = run('scripts/vault-setup.sh --print-approle', { ...release, APPROLE_BOUND_CIDRS: cidrs, SECRET_ID_TTL: '200h' });
      expect(res.status, res.stderr).to.equal(0);
      return Object.fromEntries([...res.stdout.matchAll(/^(VAULT_ROLE_ID|VAULT_SECRET_ID)=(\S+)$/gm)].map((m) => [m[1] ?? '', m[2] ?? '']));
    };
    const ids = [rotate('127.0.0.1/32'), rotate('127.0.0.1/32'), rotate('127.0.0.1/32')];
    const accessors = json(['list', 'auth/rotation-approle/role/custody-keyvault/secret-id']) as unknown as string[];
    expect(accessors, 'three rotations leave one live secret id').to.have.length(1);
    const login = (c: Record<string, string>) =>
      spawnSync(vault.bin, ['write', 'auth/rotation-approle/login', `role_id=${c['VAULT_ROLE_ID']}`, `secret_id=${c['VAULT_SECRET_ID']}`], {
        encoding: 'utf8',
        env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/root', VAULT_ADDR: vault.addr },
      });
    expect(login(ids[0] ?? {}).status, 'the first id, revoked').to.not.equal(0);
    expect(login(ids[1] ?? {}).status, 'the second id, revoked').to.not.equal(0);
    expect(login(ids[2] ?? {}).status, 'the current id').to.equal(0);

    // The signer reads when its secret id lapses (the policy grants the lookup): an alert can fire days before.
    const current = ids[2] ?? {};
    const signer = await startSigner({
      VAULT_ADDR: vault.addr,
      VAULT_ROLE_ID: current['VAULT_ROLE_ID'] ?? '',
      VAULT_SECRET_ID: current['VAULT_SECRET_ID'] ?? '',
      VAULT_APPROLE_MOUNT: 'rotation-approle',
      VAULT_TRANSIT_MOUNT: 'rotation-transit',
      VAULT_KV_MOUNT: 'rotation-kv',
      VAULT_KV_PREFIX: 'custody/rotation/keys',
    });
    try {
      const health = await new SignerClient(signer.url, signer.token, 15_000, TEST_DEPLOYMENT).health();
      expect(health.ok).to.equal(true);
      const expected = Date.now() / 1000 + 200 * 3600;
      expect(health.credentialExpiresAt).to.be.a('number').and.closeTo(expected, 120);
    } finally {
      await signer.destroy();
    }

    // Bound to a pod network Vault does not see (this Vault sees 127.0.0.1): the refusal an operator meets, with the way out.
    const outside = rotate('10.42.0.0/16');
    const refused = spawnService(
      {
        KEYVAULT_TOKEN: 't'.repeat(40),
        KEYVAULT_LISTEN: '127.0.0.1:0',
        VAULT_ADDR: vault.addr,
        VAULT_ROLE_ID: outside['VAULT_ROLE_ID'] ?? '',
        VAULT_SECRET_ID: outside['VAULT_SECRET_ID'] ?? '',
        VAULT_APPROLE_MOUNT: 'rotation-approle',
        VAULT_TRANSIT_MOUNT: 'rotation-transit',
        VAULT_KV_MOUNT: 'rotation-kv',
        VAULT_ATTEMPTS: '1',
      },
      SIGNER_MAIN,
    );
    expect(await refused.exited, refused.output()).to.equal(1);
    expect(refused.output()).to.match(/CIDR/);
    expect(refused.output()).to.include('APPROLE_BOUND_CIDRS').and.include('node or NAT address');
  });

  it('refuses mounts it did not create, changing nothing', () => {
    const before = otherTeam();
    for (const [env, path] of [
      [{ TRANSIT_MOUNT: 'transit' }, 'transit/'],
      [{ KV_MOUNT: 'secret' }, 'secret/'],
      [{ K8S_MOUNT: 'kubernetes' }, 'kubernetes/'],
      [{ AUTH: 'approle', APPROLE_BOUND_CIDRS: '127.0.0.1/32', APPROLE_MOUNT: 'approle' }, 'approle/'],
      // Our own mounts belong to release `custody`: another release does not take them over.
      [{ RELEASE: 'other' }, 'custody-transit/'],
    ] as Array<[Record<string, string>, string]>) {
      const res = run('scripts/vault-setup.sh', env);
      expect(res.status, JSON.stringify(env)).to.not.equal(0);
      expect(res.stderr, JSON.stringify(env)).to.include(`${path} exists and is not this release's`);
      expect(res.stderr).to.include('refusing to touch it');
    }
    expect(otherTeam()).to.deep.equal(before);
    // A second release: the refusal says how, and with mounts of its own (as docs/operations.md shows) it succeeds.
    const second = run('scripts/vault-setup.sh', { RELEASE: 'custody-eu' });
    expect(second.stderr).to.include('for a second release').and.include('signer.vault.transitMount');
    const own = run('scripts/vault-setup.sh', {
      RELEASE: 'custody-eu',
      NAMESPACE: 'custody-eu',
      TRANSIT_MOUNT: 'custody-eu-transit',
      KV_MOUNT: 'custody-eu-kv',
      K8S_MOUNT: 'custody-eu-kubernetes',
      K8S_HOST: 'https://k8s-api.example.internal:6443',
      K8S_CA_CERT: 'k8s-ca.crt',
    });
    expect(own.status, own.stderr).to.equal(0);
    expect(json(['read', 'auth/custody-eu-kubernetes/role/custody-keyvault']).data?.['bound_service_account_names']).to.deep.equal(['custody-eu-keyvault']);
    const noCidrs = run('scripts/vault-setup.sh', { AUTH: 'approle', RELEASE: 'fresh', TRANSIT_MOUNT: 'fresh-transit', KV_MOUNT: 'fresh-kv' });
    expect(noCidrs.status).to.not.equal(0);
    expect(noCidrs.stderr).to.include('APPROLE_BOUND_CIDRS');
    expect(Object.keys(json(['secrets', 'list']))).to.not.include('fresh-transit/');
  });

  it('the signer refuses a KV mount that could drop a key record (max_versions, delete_version_after)', async () => {
    for (const [name, settings, message] of [
      ['kv-limited', ['max_versions=3'], 'max_versions is 3'],
      ['kv-expiring', ['delete_version_after=1h'], 'delete_version_after is 1h0m0s'],
    ] as Array<[string, string[], string]>) {
      vault.cli(['secrets', 'enable', `-path=${name}`, 'kv-v2']);
      vault.cli(['write', `${name}/config`, ...settings]);
      const svc = spawnService(
        { KEYVAULT_TOKEN: 't'.repeat(40), KEYVAULT_LISTEN: '127.0.0.1:0', VAULT_ADDR: vault.addr, VAULT_TOKEN: vault.rootToken, VAULT_KV_MOUNT: name },
        SIGNER_MAIN,
      );
      expect(await svc.exited, svc.output()).to.equal(1);
      expect(svc.output()).to.include(`KV mount "${name}" could drop key records`);
      expect(svc.output()).to.include(message);
    }
  });

  it("prints the ServiceAccount name the role binds (the chart's, per release)", () => {
    const name = (release: string) =>
      execFileSync('bash', [path.join(ROOT, 'scripts/vault-setup.sh'), '--service-account-name'], {
        env: { ...process.env, RELEASE: release },
        encoding: 'utf8',
      }).trim();
    expect(name('custody')).to.equal('custody-keyvault');
    expect(name('payments')).to.equal('payments-custody-keyvault');
  });
});

describe('keyvault: Vault access as reviewed files, applied by a token of the setup policy only', function () {
  this.timeout(120_000);
  let vault: DevVault;
  let work: string;
  const policyFile = (name: string) => readFileSync(path.join(ROOT, 'keyvault/vault/policies', `${name}.hcl`), 'utf8');
  /** What the setup script runs with: the dev Vault, both auth methods, `token`. */
  const setupEnv = (token: string): Record<string, string> => ({
    PATH: process.env['PATH'] ?? '',
    HOME: process.env['HOME'] ?? '/root',
    VAULT_BIN: vault.bin,
    VAULT_ADDR: vault.addr,
    VAULT_TOKEN: token,
    AUTH: 'both',
    APPROLE_BOUND_CIDRS: '127.0.0.1/32',
    K8S_HOST: 'https://k8s-api.example.internal:6443',
    K8S_CA_CERT: 'k8s-ca.crt',
  });
  const setup = (token: string, args: string[] = [], env: Record<string, string> = {}) =>
    spawnSync('bash', [path.join(ROOT, 'scripts/vault-setup.sh'), ...args], { cwd: work, encoding: 'utf8', env: { ...setupEnv(token), ...env } });
  /** A request as a token's holder would make it, with Vault's status and errors. */
  const api = async (token: string, method: string, p: string, body?: unknown) => {
    const res = await fetch(`${vault.addr}/v1/${p}`, {
      method,
      headers: { 'x-vault-token': token, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return {
      status: res.status,
      body: (text === '' ? {} : JSON.parse(text)) as { errors?: string[]; data?: Record<string, unknown>; auth?: Record<string, unknown> },
    };
  };
  const login = async (creds: Record<string, string>) => {
    const res = await api('', 'POST', 'auth/custody-approle/login', { role_id: creds['VAULT_ROLE_ID'], secret_id: creds['VAULT_SECRET_ID'] });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return String(res.body.auth?.['client_token']);
  };
  const creds = (stdout: string) => Object.fromEntries([...stdout.matchAll(/^(VAULT_ROLE_ID|VAULT_SECRET_ID)=(\S+)$/gm)].map((m) => [m[1] ?? '', m[2] ?? '']));
  /** Each attempt must be refused by the policy itself: 403 permission denied, nothing else. */
  const refusedAll = async (token: string, attempts: Array<[string, string, unknown?]>) => {
    for (const [method, p, body] of attempts) {
      const res = await api(token, method, p, body);
      expect(res.status, `${method} ${p}: ${JSON.stringify(res.body)}`).to.equal(403);
      expect(JSON.stringify(res.body.errors), `${method} ${p}`).to.include('permission denied');
    }
  };

  before(async function () {
    this.timeout(45 * 60_000);
    vault = await startDevVault();
    work = mkdtempSync(path.join(tmpdir(), 'custody-vault-access-'));
    writeFileSync(path.join(work, 'k8s-ca.crt'), (await createCa('kubernetes API CA')).certPem);
    // Another team's transit key and secret, which no custody token may reach.
    vault.cli(['secrets', 'enable', 'transit']);
    vault.cli(['write', '-f', 'transit/keys/other-app']);
    vault.cli(['kv', 'put', 'secret/other', 'password=hunter2']);
  });
  after(async () => {
    await vault?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('sets Vault up with a token of the setup policy only; writes the policy files verbatim; the signer works and its token is refused everything else', async () => {
    // The administrator: the setup policy, as the script prints it, and a short-lived token of it alone.
    const printed = setup('', ['--print-policy', 'setup']);
    expect(printed.status, printed.stderr).to.equal(0);
    expect(printed.stdout).to.equal(policyFile('setup'));
    vault.cli(['policy', 'write', 'custody-setup-custody', '-'], printed.stdout);
    const setupToken = vault.cli(['token', 'create', '-policy=custody-setup-custody', '-no-default-policy', '-ttl=10m', '-field=token']).trim();

    // Both auth methods, twice (the second run finds everything made), and the rewrap role's credentials.
    for (const pass of [1, 2]) {
      const res = setup(setupToken);
      expect(res.status, `pass ${pass}: ${res.stderr}`).to.equal(0);
    }
    const signerRun = setup(setupToken, ['--print-approle']);
    expect(signerRun.status, signerRun.stderr).to.equal(0);
    const rewrapRun = setup(setupToken, ['--print-approle', 'rewrap']);
    expect(rewrapRun.status, rewrapRun.stderr).to.equal(0);

    // Verbatim: with the default names, what Vault holds is the reviewed file, byte for byte.
    // (The CLI may end a field with a newline of its own.)
    expect(vault.cli(['read', '-field=policy', 'sys/policies/acl/custody-keyvault-custody']).trimEnd()).to.equal(policyFile('signer').trimEnd());
    expect(vault.cli(['read', '-field=policy', 'sys/policies/acl/custody-rewrap-custody']).trimEnd()).to.equal(policyFile('rewrap').trimEnd());
    const k8sRewrap = JSON.parse(vault.cli(['read', '-format=json', 'auth/custody-kubernetes/role/custody-rewrap'])).data;
    expect(k8sRewrap.bound_service_account_names).to.deep.equal(['custody-rewrap']);
    expect(k8sRewrap.token_policies).to.deep.equal(['custody-rewrap-custody']);

    // The setup token reaches nothing beyond its slice.
    await refusedAll(setupToken, [
      ['GET', 'secret/data/other'],
      ['PUT', 'sys/policies/acl/other-team', { policy: 'path "*" { capabilities = ["sudo"] }' }],
      ['POST', 'sys/mounts/elsewhere', { type: 'kv' }],
      ['POST', 'custody-transit/keys/custody-wallets/rotate'],
      ['GET', 'custody-transit/export/encryption-key/custody-wallets'],
      ['POST', 'auth/token/create', {}],
      ['POST', 'sys/auth/other-auth', { type: 'userpass' }],
    ]);

    // The signer's work, under the policy: a key created, a message signed with it.
    const signerCreds = creds(signerRun.stdout);
    const signer = await startSigner({
      VAULT_ADDR: vault.addr,
      VAULT_ROLE_ID: signerCreds['VAULT_ROLE_ID'] ?? '',
      VAULT_SECRET_ID: signerCreds['VAULT_SECRET_ID'] ?? '',
      VAULT_APPROLE_MOUNT: 'custody-approle',
      VAULT_KV_PREFIX: 'custody/custody/keys',
    });
    let keyId: string;
    let stored: Record<string, unknown>;
    try {
      const client = new SignerClient(signer.url, signer.token, 15_000, TEST_DEPLOYMENT);
      const key = await client.createKey(keyIdOf('access'), 'access', TEST_PROJECT);
      keyId = key.keyId;
      await client.putPolicy(TEST_PROJECT, { policy: { rules: [{ name: 'any message', action: 'allow', method: 'personal_sign' }] } }, 0, 'test');
      const signed = await client.sign(key.keyId, TEST_PROJECT, {
        caller: 'server',
        operation: { method: 'personal_sign', params: { message: 'least privilege' } },
      });
      expect(signed.allowed).to.equal(true);
      if (!signed.allowed) return;
      expect(verifyMessage('least privilege', String(signed.result['signature']))).to.equal(key.address);
      stored = JSON.parse(vault.cli(['kv', 'get', '-format=json', `custody-kv/custody/custody/keys/${keyId}`])).data;
    } finally {
      await signer.destroy();
    }

    // The signer's own Vault token, as a thief of it would hold it: every other thing is refused.
    const signerToken = await login(signerCreds);
    const own = `custody-kv/data/custody/custody/keys/${keyId}`;
    expect((await api(signerToken, 'GET', own)).status, 'its own record: readable').to.equal(200);
    await refusedAll(signerToken, [
      // Export or back up a key.
      ['GET', 'custody-transit/export/encryption-key/custody-wallets'],
      ['GET', 'custody-transit/export/signing-key/custody-service'],
      ['GET', 'custody-transit/backup/custody-wallets'],
      // Another team's mounts.
      ['GET', 'secret/data/other'],
      ['GET', 'transit/keys/other-app'],
      ['POST', 'transit/decrypt/other-app', { ciphertext: 'vault:v1:AAAA' }],
      // Delete, reconfigure or rotate a transit key; make another.
      ['DELETE', 'custody-transit/keys/custody-wallets'],
      ['POST', 'custody-transit/keys/custody-wallets/config', { deletion_allowed: true }],
      ['POST', 'custody-transit/keys/custody-wallets/config', { exportable: true }],
      ['POST', 'custody-transit/keys/custody-wallets/rotate'],
      ['POST', 'custody-transit/keys/custody-service/rotate'],
      ['POST', 'custody-transit/keys/custody-wallets/trim', { min_available_version: 1 }],
      ['POST', 'custody-transit/keys/another', { type: 'aes256-gcm96' }],
      ['POST', 'custody-transit/config/keys', { disable_upsert: false }],
      ['POST', 'custody-transit/rewrap/custody-wallets', { ciphertext: String((stored['data'] as Record<string, unknown>)['ciphertext']) }],
      // KV outside its prefix, listing, and any change of its own records or the mount.
      ['GET', 'custody-kv/data/custody/other-release/keys/anything'],
      ['LIST', 'custody-kv/metadata/custody/custody/keys/'],
      ['POST', own, { data: { address: '0x0000000000000000000000000000000000000000' } }],
      ['POST', own, { options: { cas: 1 }, data: { address: '0x0000000000000000000000000000000000000000' } }],
      ['DELETE', own],
      ['POST', `custody-kv/delete/custody/custody/keys/${keyId}`, { versions: [1] }],
      ['POST', `custody-kv/destroy/custody/custody/keys/${keyId}`, { versions: [1] }],
      ['DELETE', `custody-kv/metadata/custody/custody/keys/${keyId}`],
      ['POST', 'custody-kv/config', { max_versions: 1 }],
      // Policies, tokens, auth, and sudo paths.
      ['PUT', 'sys/policies/acl/custody-keyvault-custody', { policy: 'path "*" { capabilities = ["sudo"] }' }],
      ['POST', 'auth/token/create', {}],
      ['POST', 'auth/token/create-orphan', {}],
      ['POST', 'auth/custody-approle/role/custody-keyvault/secret-id', {}],
      ['POST', 'auth/custody-approle/role/custody-keyvault', { token_policies: 'root' }],
      ['POST', 'sys/mounts/mine', { type: 'kv' }],
      ['GET', 'sys/audit'],
      ['PUT', 'sys/seal'],
      ['GET', 'sys/raw/sys/policy'],
    ]);
    // The record is as the signer wrote it: version 1, unchanged.
    const after = JSON.parse(vault.cli(['kv', 'get', '-format=json', `custody-kv/custody/custody/keys/${keyId}`])).data;
    expect(after.metadata.version).to.equal(1);
    expect(after.data).to.deep.equal((stored as { data: unknown }).data);

    // The rewrap job's token: records read and updated, nothing created, deleted or exported.
    const rewrapToken = await login(creds(rewrapRun.stdout));
    expect((await api(rewrapToken, 'LIST', 'custody-kv/metadata/custody/custody/keys/')).status).to.equal(200);
    await refusedAll(rewrapToken, [
      ['POST', 'custody-kv/data/custody/custody/keys/00000000-0000-4000-8000-000000000000', { data: { address: 'x' } }],
      ['DELETE', own],
      ['POST', `custody-kv/destroy/custody/custody/keys/${keyId}`, { versions: [1] }],
      ['POST', 'custody-transit/encrypt/custody-wallets', { plaintext: 'AAAA', context: 'AAAA' }],
      ['POST', 'custody-transit/keys/custody-wallets/rotate'],
      ['GET', 'custody-transit/export/encryption-key/custody-wallets'],
      ['POST', 'custody-transit/sign/custody-service', { input: 'AAAA' }],
      ['GET', 'secret/data/other'],
      ['POST', 'auth/token/create', {}],
    ]);
  });

  it('needs every path of the setup policy: without any one of them the setup fails', async function () {
    this.timeout(15 * 60_000);
    const lines = policyFile('setup').split('\n');
    const paths = lines.flatMap((line, index) => (line.startsWith('path "') ? [{ line, index }] : []));
    expect(paths.length).to.be.greaterThan(20);
    /** The setup as a process that does not hold this one's event loop, so that several run at once. */
    const run = (command: string, args: string[], env: Record<string, string>, input?: string) =>
      new Promise<{ status: number; stdout: string }>((resolve) => {
        const child = execFile(command, args, { cwd: work, encoding: 'utf8', env: { ...setupEnv(''), ...env } }, (err, stdout) =>
          resolve({ status: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout }),
        );
        child.stdin?.end(input);
      });
    const without = async (n: number, { index }: { index: number }): Promise<number> => {
      // A release of its own for each: fresh mounts, roles and policies.
      const release = `least${n}`;
      const names = {
        RELEASE: release,
        TRANSIT_MOUNT: `${release}-transit`,
        KV_MOUNT: `${release}-kv`,
        K8S_MOUNT: `${release}-k8s`,
        APPROLE_MOUNT: `${release}-approle`,
      };
      const policy = setup('', ['--print-policy', 'setup'], names).stdout.split('\n');
      policy.splice(index, 1);
      const root = { VAULT_TOKEN: vault.rootToken };
      expect((await run(vault.bin, ['policy', 'write', `setup-${release}`, '-'], root, policy.join('\n'))).status).to.equal(0);
      const token = (
        await run(vault.bin, ['token', 'create', `-policy=setup-${release}`, '-no-default-policy', '-ttl=10m', '-field=token'], root)
      ).stdout.trim();
      // What an operator runs: both auth methods, and each role's secret id rotated (which revokes the earlier one).
      for (const args of [['--print-approle'], ['--print-approle'], ['--print-approle', 'rewrap'], ['--print-approle', 'rewrap']]) {
        const { status } = await run('bash', [path.join(ROOT, 'scripts/vault-setup.sh'), ...args], { ...names, VAULT_TOKEN: token });
        if (status !== 0) return status;
      }
      return 0;
    };
    // Four paths at a time (one after another took a minute and a half).
    const statuses: number[] = [];
    for (let i = 0; i < paths.length; i += 4) statuses.push(...(await Promise.all(paths.slice(i, i + 4).map((p, j) => without(i + j, p)))));
    for (const [n, { line }] of paths.entries()) expect(statuses[n], `the setup succeeded without ${line}`).to.not.equal(0);
  });

  it('substitutes only the names an operator changes, in quoted paths, and refuses a name that could escape one', () => {
    const eu = setup('', ['--print-policy', 'signer'], { RELEASE: 'eu', TRANSIT_MOUNT: 'eu-transit', KV_MOUNT: 'eu-kv', TRANSIT_KEY: 'eu-wallets' });
    expect(eu.status, eu.stderr).to.equal(0);
    const expected = policyFile('signer')
      .split('\n')
      .map((l) =>
        l.startsWith('path "')
          ? l
              .replace('"custody-transit/', '"eu-transit/')
              .replace('/custody-wallets"', '/eu-wallets"')
              .replace('"custody-kv/', '"eu-kv/')
              .replace('/mounts/custody-kv"', '/mounts/eu-kv"')
              .replace('/custody/custody/keys/', '/custody/eu/keys/')
          : l,
      )
      .join('\n');
    expect(eu.stdout).to.equal(expected);
    expect(eu.stdout, 'comments keep the defaults').to.include('TRANSIT_MOUNT (custody-transit)');
    for (const bad of ['a"b', 'x/*', 'a b', '../up', 'a}']) {
      const res = setup('', ['--print-policy', 'signer'], { KV_MOUNT: bad });
      expect(res.status, bad).to.not.equal(0);
      expect(res.stderr, bad).to.include('KV_MOUNT must be');
    }
  });
});
