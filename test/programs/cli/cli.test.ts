import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import { verifyMessage } from 'ethers';
import { createDb } from '../../../src/platform/db/knex.js';
import { dataKeyId, SecretBox } from '../../../src/platform/crypto/secrets.js';
import { COMMANDS } from '../../../src/programs/cli/commands.js';
import { loadCliEnv } from '../../../src/programs/cli/config.js';
import { run } from '../../../src/programs/cli/run.js';
import { startAnvil, type Anvil } from '../../support/anvil.js';
import { startAppWithIdp, type TestApp } from '../../support/app.js';
import { chainConfig } from '../../support/chain.js';
import type { TestIdp } from '../../support/idp.js';
import { scratchDatabase } from '../../support/process.js';
import type { Receiver } from '../../support/receiver.js';
import { until } from '../../support/wait.js';

const CLI = path.resolve('dist/src/programs/cli/main.js');
const AUDIENCE = 'urn:custody:testnet';
const BOB = '0x0000000000000000000000000000000000000B0b';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** The command the arguments name (two words, else one), as the CLI looks it up. */
function commandOf(args: string[]): string | undefined {
  const words = args.filter((a, i) => !a.startsWith('--') && !(args[i - 1]?.startsWith('--') && !args[i - 1]?.includes('=')));
  return [words.slice(0, 2).join(' '), words[0] ?? ''].find((name) => name in COMMANDS);
}

/** Every command this file ran for real (not for its --help): each must be, and each the README shows. */
const ran = new Set<string>();

/** The CLI as a process, as an operator runs it. */
function custody(args: string[], env: Record<string, string> = {}, cwd = tmpdir()): Promise<Run> {
  const name = commandOf(args);
  if (name !== undefined && !args.includes('--help')) ran.add(name);
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { cwd, env: { PATH: process.env['PATH'] ?? '', ...env }, timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** The CLI's dispatcher in this process, its output captured (for what needs no process of its own). */
async function custodyHere(args: string[]): Promise<Run> {
  const sink = () => {
    const chunks: Buffer[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        chunks.push(chunk);
        done();
      },
    });
    return { stream, text: () => Buffer.concat(chunks).toString('utf8') };
  };
  const out = sink();
  const err = sink();
  const code = await run(args, loadCliEnv({}), { stdout: out.stream, stderr: err.stream });
  return { code, stdout: out.text(), stderr: err.text() };
}

describe('operator CLI (custody)', function () {
  this.timeout(120_000);
  let app: TestApp;
  let idp: TestIdp;
  let receiver: Receiver;
  let dir: string;
  let close: () => Promise<void>;
  let env: Record<string, string>;
  // The chain `transactions` commands send on.
  let anvil: Anvil;

  before(async () => {
    anvil = await startAnvil();
    ({ app, idp, receiver, dir, close } = await startAppWithIdp({
      WALLET_WEBHOOK_BACKGROUND_RETRY: 'false',
      // Re-pricing only when asked (speed-up): an automatic one on a slow machine would add attempts.
      CHAINS: JSON.stringify([chainConfig(anvil, { stuckAfterMs: 600_000 })]),
      TRANSACTIONS_TICK_MS: '50',
    }));
    env = { CUSTODY_URL: app.url, CUSTODY_TOKEN: app.operatorToken };
  });
  after(async () => {
    await close();
    await anvil.stop();
  });

  it('explains itself: usage with no command (exit 2), help (exit 0), unknown commands and bad flags (exit 2)', async () => {
    const none = await custody([]);
    expect(none.code).to.equal(2);
    expect(none.stdout).to.match(/^usage: custody/);
    const help = await custody(['--help']);
    expect(help.code).to.equal(0);
    for (const c of [
      'bootstrap',
      'tokens create',
      'tokens list',
      'tokens revoke',
      'project rotate-key',
      'deliveries list',
      'deliveries retry',
      'issuer check',
      'migrate',
    ])
      expect(help.stdout).to.include(`custody ${c}`);
    const unknown = await custody(['frobnicate'], env);
    expect(unknown.code).to.equal(2);
    expect(unknown.stderr).to.include('unknown command "frobnicate"');
    const badId = await custody(['tokens', 'list', '--org', 'abc'], env);
    expect(badId.code).to.equal(2);
    expect(badId.stderr).to.include('--org must be a positive integer');
    const missing = await custody(['bootstrap', '--org', 'x'], env);
    expect(missing.code).to.equal(2);
    expect(missing.stderr).to.include('--project is required');
    const noToken = await custody(['tokens', 'list', '--org', '1'], { CUSTODY_URL: app.url });
    expect(noToken.code).to.equal(2);
    expect(noToken.stderr).to.include('no API token');
  });

  it('bootstraps an organisation, project and admin token; manages tokens (create, list as table and JSON, revoke); errors exit 1 with the problem', async () => {
    const iss = await idp.issuer('cli');
    const boot = await custody(
      ['bootstrap', '--org', 'CLI Org', '--project', 'CLI app', '--issuer', iss.issuer, '--wallet-webhook-url', `${receiver.url}/w`, '--json'],
      env,
    );
    expect(boot.code, boot.stderr).to.equal(0);
    const created = JSON.parse(boot.stdout) as {
      organisationId: number;
      projectId: number;
      projectKey: string;
      token: string;
      tokenId: number;
      walletWebhookSecret: string;
    };
    expect(created.projectKey).to.match(/^pk_test_/);
    expect(created.token).to.match(/^sk_test_/);
    expect(boot.stderr).to.include('shown once');
    // The new token works: it lists its own organisation's tokens, as a table by default.
    const orgAdmin = { CUSTODY_URL: app.url, CUSTODY_TOKEN: created.token };
    const made = await custody(['tokens', 'create', '--org', String(created.organisationId), '--name', 'reader', '--role', 'read', '--json'], orgAdmin);
    expect(made.code, made.stderr).to.equal(0);
    const reader = JSON.parse(made.stdout) as { id: number; token: string; role: string };
    expect(reader.role).to.equal('read');
    const table = await custody(['tokens', 'list', '--org', String(created.organisationId)], orgAdmin);
    expect(table.code).to.equal(0);
    const lines = table.stdout.trim().split('\n');
    expect(lines[0]).to.match(/^id\s+name\s+role\s+scope\s+projectId\s+createdAt\s+revokedAt$/);
    expect(lines[1]).to.match(/^-+\s+-+/);
    expect(lines.slice(2).map((l) => l.split(/\s+/)[1])).to.have.members(['admin', 'reader']);
    expect(table.stdout).not.to.include(reader.token);
    const revoke = await custody(['tokens', 'revoke', '--org', String(created.organisationId), String(reader.id)], orgAdmin);
    expect(revoke.code, revoke.stderr).to.equal(0);
    const unknown = await custody(['tokens', 'revoke', '--org', String(created.organisationId), '999999999'], orgAdmin);
    expect(unknown.code).to.equal(1);
    expect(unknown.stderr).to.match(/answered 404 not_found: No such token/);
    const listed = await custody(['tokens', 'list', '--org', String(created.organisationId), '--show-revoked', '--json'], orgAdmin);
    expect((JSON.parse(listed.stdout) as Array<{ id: number; revokedAt: string | null }>).find((t) => t.id === reader.id)?.revokedAt).to.be.a('string');
    // A revoked token is refused: exit 1, the problem on stderr.
    const refused = await custody(['tokens', 'list', '--org', String(created.organisationId)], { CUSTODY_URL: app.url, CUSTODY_TOKEN: reader.token });
    expect(refused.code).to.equal(1);
    expect(refused.stderr).to.match(/answered 401 unauthorized/);
    // Validation problems name the field.
    const badUrl = await custody(['bootstrap', '--org', 'x', '--project', 'y', '--issuer', 'http://plain.example.com'], env);
    expect(badUrl.code).to.equal(1);
    expect(badUrl.stderr).to.match(/answered 400/);
  });

  it('rotates a project key (the new one signs users in), checks an issuer (exit 1 when a check fails), lists and retries failed deliveries with progress', async () => {
    const iss = await idp.issuer('cli2');
    receiver.status = 500;
    const boot = await custody(
      ['bootstrap', '--org', 'CLI Org 2', '--project', 'p', '--issuer', iss.issuer, '--wallet-webhook-url', `${receiver.url}/w`, '--json'],
      env,
    );
    const b = JSON.parse(boot.stdout) as { projectId: number; token: string };
    const admin = { CUSTODY_URL: app.url, CUSTODY_TOKEN: b.token };

    const rotated = await custody(['project', 'rotate-key', '--project', String(b.projectId), '--grace-seconds', '0', '--json'], admin);
    expect(rotated.code, rotated.stderr).to.equal(0);
    const { projectKey } = JSON.parse(rotated.stdout) as { projectKey: string };
    const jwt = await iss.sign({ email: 'lin@example.com' }, { audience: AUDIENCE });
    const signin = await app.client.post('/api/v1/signin', { key: projectKey }, { token: jwt });
    expect(signin.status, signin.text).to.equal(200);

    const good = await custody(['issuer', 'check', '--project', String(b.projectId), '--jwt', jwt], admin);
    expect(good.code, good.stderr).to.equal(0);
    expect(good.stdout).to.match(/^name\s+outcome\s+detail/);
    expect(good.stderr).to.include('every check passed');
    writeFileSync(path.join(dir, 'bad.jwt'), await iss.sign({}, { audience: 'urn:someone-else' }));
    const bad = await custody(['issuer', 'check', '--project', String(b.projectId), '--jwt-file', path.join(dir, 'bad.jwt'), '--json'], admin);
    expect(bad.code).to.equal(1);
    const report = JSON.parse(bad.stdout) as { ok: boolean; checks: Array<{ name: string; outcome: string }> };
    expect(report.ok).to.equal(false);
    expect(report.checks.some((c) => c.outcome === 'failed')).to.equal(true);

    // The wallet-created webhook failed (the receiver answers 500): listed, then retried once the receiver is fixed.
    let listed: Array<{ id: number; kind: string; lastStatus: number }> = [];
    await until('the failed wallet delivery', async () => {
      const r = await custody(['deliveries', 'list', '--project', String(b.projectId), '--json'], admin);
      listed = JSON.parse(r.stdout) as typeof listed;
      return listed.length === 1;
    });
    expect(listed[0]).to.include({ kind: 'wallet', lastStatus: 500 });
    const human = await custody(['deliveries', 'list', '--project', String(b.projectId)], admin);
    expect(human.stdout).to.match(/^id\s+kind\s+webhookId\s+event\s+url\s+attempts\s+lastStatus/);
    receiver.status = 204;
    const before = receiver.received.length;
    const retry = await custody(['deliveries', 'retry', '--project', String(b.projectId), '--all'], admin);
    expect(retry.code, retry.stderr).to.equal(0);
    expect(retry.stderr).to.include(`retrying 1/1: delivery ${listed[0]?.id}`);
    expect(retry.stdout).to.match(/pending/);
    await until('the retried delivery', () => receiver.received.length > before);
    await until(
      'an empty failed list',
      async () => JSON.parse((await custody(['deliveries', 'list', '--project', String(b.projectId), '--json'], admin)).stdout).length === 0,
    );
    const nothing = await custody(['deliveries', 'retry', '--project', String(b.projectId), '--all'], admin);
    expect(nothing.code).to.equal(2);
    expect(nothing.stderr).to.include('no failed deliveries');
  });

  it('writes a signing policy and signs with a wallet under it (signer token); a denial exits 1 with policy_denied', async () => {
    const iss = await idp.issuer('cli-sign');
    const boot = await custody(['bootstrap', '--org', 'CLI Sign', '--project', 'p', '--issuer', iss.issuer, '--json'], env);
    expect(boot.code, boot.stderr).to.equal(0);
    const b = JSON.parse(boot.stdout) as { organisationId: number; projectId: number; projectKey: string; token: string };
    const admin = { CUSTODY_URL: app.url, CUSTODY_TOKEN: b.token };
    const signin = await app.client.post(
      '/api/v1/signin',
      { key: b.projectKey },
      { token: await iss.sign({ email: 'sig@example.com' }, { audience: AUDIENCE }) },
    );
    expect(signin.status, signin.text).to.equal(200);
    const policyFile = path.join(dir, 'policy.json');
    writeFileSync(
      policyFile,
      JSON.stringify({
        rules: [{ name: 'orders', action: 'allow', method: 'personal_sign', conditions: [{ field: 'message', op: 'prefix', value: 'order ' }] }],
      }),
    );
    const put = await custody(['policy', 'put', '--project', String(b.projectId), '--file', policyFile, '--if-version', '0', '--json'], admin);
    expect(put.code, put.stderr).to.equal(0);
    expect(JSON.parse(put.stdout)).to.include({ version: 1 });
    expect(JSON.parse((await custody(['policy', 'get', '--project', String(b.projectId), '--json'], admin)).stdout)).to.include({ version: 1 });

    const minted = await custody(
      ['tokens', 'create', '--org', String(b.organisationId), '--name', 'backend', '--role', 'signer', '--project', String(b.projectId), '--json'],
      admin,
    );
    expect(minted.code, minted.stderr).to.equal(0);
    const signerEnv = { CUSTODY_URL: app.url, CUSTODY_TOKEN: (JSON.parse(minted.stdout) as { token: string }).token };
    const wallet = ['--project', String(b.projectId), '--wallet', String(signin.body.walletId)];
    const signed = await custody(['sign', ...wallet, '--method', 'personal_sign', '--message', 'order 7', '--json'], signerEnv);
    expect(signed.code, signed.stderr).to.equal(0);
    expect(verifyMessage('order 7', (JSON.parse(signed.stdout) as { signature: string }).signature)).to.equal(signin.body.walletAddress);
    const denied = await custody(['sign', ...wallet, '--method', 'personal_sign', '--params', JSON.stringify({ message: 'refund 7' })], signerEnv);
    expect(denied.code).to.equal(1);
    expect(denied.stderr).to.include('policy_denied');
    expect((await custody(['sign', ...wallet, '--method', 'eth_sign', '--message', 'x'], signerEnv)).code, 'unknown method: usage').to.equal(2);
  });

  it('sends a transaction from a wallet (signer token), once per idempotency key; a denial exits 1; gets, lists, speeds up and cancels one not mined yet', async () => {
    const iss = await idp.issuer('cli-send');
    const boot = await custody(['bootstrap', '--org', 'CLI Send', '--project', 'p', '--issuer', iss.issuer, '--json'], env);
    expect(boot.code, boot.stderr).to.equal(0);
    const b = JSON.parse(boot.stdout) as { organisationId: number; projectId: number; projectKey: string; token: string };
    const admin = { CUSTODY_URL: app.url, CUSTODY_TOKEN: b.token };
    const signin = await app.client.post(
      '/api/v1/signin',
      { key: b.projectKey },
      { token: await iss.sign({ email: 'send@example.com' }, { audience: AUDIENCE }) },
    );
    expect(signin.status, signin.text).to.equal(200);
    const from: string = signin.body.walletAddress.toLowerCase();
    await anvil.fund(from, 10n ** 20n);
    const policyFile = path.join(dir, 'send-policy.json');
    writeFileSync(
      policyFile,
      JSON.stringify({
        rules: [{ name: 'small', action: 'allow', method: 'eth_sendTransaction', conditions: [{ field: 'value', op: 'lte', value: '5000' }] }],
      }),
    );
    expect((await custody(['policy', 'put', '--project', String(b.projectId), '--file', policyFile], admin)).code).to.equal(0);
    const minted = await custody(
      ['tokens', 'create', '--org', String(b.organisationId), '--name', 'backend', '--role', 'signer', '--project', String(b.projectId), '--json'],
      admin,
    );
    const signerEnv = { CUSTODY_URL: app.url, CUSTODY_TOKEN: (JSON.parse(minted.stdout) as { token: string }).token };
    const project = ['--project', String(b.projectId)];
    const send = [...project, '--wallet', String(signin.body.walletId), '--chain', String(anvil.chainId), '--to', BOB];
    type Tx = { id: number; status: string; nonce: string | null; hash: string; cancelRequested: boolean; attempts?: Array<{ hash: string; purpose: string }> };
    const tx = (r: Run): Tx => JSON.parse(r.stdout) as Tx;

    const sent = await custody(['transactions', 'send', ...send, '--value', '1000', '--idempotency-key', 'cli-1', '--json'], signerEnv);
    expect(sent.code, sent.stderr).to.equal(0);
    // The answer is the send as it stands: when the worker holds the wallet's queue it is still
    // `queued` (docs/transactions.md), otherwise signed or further; the node mines at once.
    expect(['queued', 'signed', 'submitted', 'mined']).to.include(tx(sent).status);
    const broadcast = await until('the send broadcast', async () => {
      const got = tx(await custody(['transactions', 'get', ...project, String(tx(sent).id), '--json'], signerEnv));
      return got.hash ? got : undefined;
    });
    expect(broadcast.nonce).to.equal('0');
    type OnChain = { from: string; to: string; value: string; blockNumber: string | null };
    const onChain = await until('the send mined', async () => {
      const t = await anvil.rpc<OnChain | null>('eth_getTransactionByHash', [broadcast.hash]);
      return t?.blockNumber ? t : undefined;
    });
    expect([onChain.from, onChain.to, BigInt(onChain.value)]).to.deep.equal([from, BOB.toLowerCase(), 1000n]);
    // Run again with the same key: the same transaction, nothing sent twice.
    const again = await custody(['transactions', 'send', ...send, '--value', '1000', '--idempotency-key', 'cli-1', '--json'], signerEnv);
    expect(tx(again).id).to.equal(tx(sent).id);
    expect(BigInt(await anvil.rpc<string>('eth_getTransactionCount', [from, 'latest']))).to.equal(1n);

    // Another process holds the wallet's queue for a moment (the worker did in a CI run): the policy
    // decides when the send's turn comes, and the command waits for that decision unless told not to.
    await app.db.raw("UPDATE send_queues SET lease_owner = 'another process', lease_until = now() + interval '5 seconds' WHERE chain_id = ? AND address = ?", [
      anvil.chainId,
      from,
    ]);
    const unwaited = await custody(['transactions', 'send', ...send, '--value', '9000', '--wait-seconds', '0', '--json'], signerEnv);
    expect(unwaited.code, unwaited.stderr).to.equal(0);
    expect(tx(unwaited).status).to.equal('queued');
    expect(unwaited.stderr).to.include('is still queued');
    const denied = await custody(['transactions', 'send', ...send, '--value', '9000', '--json'], signerEnv);
    expect(denied.code, denied.stdout).to.equal(1);
    expect(denied.stderr).to.include('policy_denied');
    expect(tx(await custody(['transactions', 'get', ...project, String(tx(unwaited).id), '--json'], signerEnv)).status).to.equal('failed');
    expect((await custody(['transactions', 'send', ...send, '--wait-seconds', '1.5'], signerEnv)).code, 'not whole seconds').to.equal(2);
    expect((await custody(['transactions', 'send', ...send, '--max-fee-per-gas', '1'], signerEnv)).code, 'a fee cap without a tip').to.equal(2);
    expect((await custody(['transactions', 'send', ...send.slice(0, -2), '--to', '0x12'], signerEnv)).code, 'not an address').to.equal(2);
    expect((await custody(['transactions', 'list', ...project, '--status', 'lost'], signerEnv)).code, 'no such status').to.equal(2);

    // A send the chain does not mine yet: re-priced, then cancelled by a no-op at its nonce, which is mined.
    await anvil.rpc('evm_setAutomine', [false]);
    let held: Tx;
    try {
      const waiting = await custody(['transactions', 'send', ...send, '--value', '10', '--json'], signerEnv);
      expect(tx(waiting).nonce).to.equal('1');
      const id = String(tx(waiting).id);
      await until('the send broadcast', async () => tx(await custody(['transactions', 'get', ...project, id, '--json'], signerEnv)).status === 'submitted');
      const faster = await custody(['transactions', 'speed-up', ...project, id, '--json'], signerEnv);
      expect(faster.code, faster.stderr).to.equal(0);
      expect(tx(faster).hash).to.not.equal(tx(waiting).hash);
      const cancelled = await custody(['transactions', 'cancel', ...project, id, '--json'], signerEnv);
      expect(cancelled.code, cancelled.stderr).to.equal(0);
      expect(tx(cancelled).cancelRequested).to.equal(true);
      await anvil.rpc('anvil_mine', ['0x3']);
      held = await until('the cancel mined', async () => {
        const got = tx(await custody(['transactions', 'get', ...project, id, '--json'], signerEnv));
        return got.status === 'cancelled' ? got : undefined;
      });
    } finally {
      await anvil.rpc('evm_setAutomine', [true]);
    }
    expect(held.attempts?.map((a) => a.purpose)).to.deep.equal(['send', 'speedUp', 'cancel']);
    const cancel = held.attempts?.find((a) => a.purpose === 'cancel');
    const noOp = await anvil.rpc<{ from: string; to: string; value: string; nonce: string }>('eth_getTransactionByHash', [cancel?.hash]);
    expect([noOp.from, noOp.to, BigInt(noOp.value), BigInt(noOp.nonce)]).to.deep.equal([from, from, 0n, 1n]);

    const all = await custody(['transactions', 'list', ...project, '--wallet', String(signin.body.walletId), '--json'], signerEnv);
    const listed = JSON.parse(all.stdout) as Tx[];
    expect(listed.map((t) => t.id)).to.deep.equal([tx(sent).id, tx(unwaited).id, tx(denied).id, held.id]);
    expect(listed.map((t) => t.status).slice(1)).to.deep.equal(['failed', 'failed', 'cancelled']);
    expect(['mined', 'confirmed'], 'the first send, on the chain').to.include(listed[0]?.status);
    const failed = await custody(['transactions', 'list', ...project, '--status', 'failed', '--chain', String(anvil.chainId)], signerEnv);
    expect(failed.code, failed.stderr).to.equal(0);
    const rows = failed.stdout.trim().split('\n');
    expect(rows[0]).to.match(/^id\s+walletId\s+chainId\s+status\s+waiting\s+nonce\s+to\s+value\s+hash\s+createdAt$/);
    expect(rows.slice(2).map((l) => l.split(/\s+/)[3])).to.deep.equal(['failed', 'failed']);
  });

  it('data-key: reports which key seals each value, moves them to the current key, and says when a key is missing', async () => {
    const scratch = await scratchDatabase();
    const db = createDb({ url: scratch.url, poolMax: 1 });
    try {
      expect((await custody(['migrate'], { DATABASE_URL: scratch.url })).code).to.equal(0);
      const [k1, k2, k3] = [randomBytes(32), randomBytes(32), randomBytes(32)];
      // A value sealed under the old key, as an earlier deployment left it.
      await db('dev_idp_key').insert({ kid: 'k', public_jwk: {}, private_key_sealed: new SecretBox(k1).seal('pkcs8', 'custody:dev-idp-key:v1') });
      const keys = (current: Buffer, ...others: Buffer[]) => ({
        DATABASE_URL: scratch.url,
        DATA_ENCRYPTION_KEY: current.toString('base64'),
        ...(others.length ? { DATA_DECRYPTION_KEYS: others.map((k) => k.toString('base64')).join(',') } : {}),
      });
      const before = await custody(['data-key', 'status'], keys(k2, k1));
      expect(before.code).to.equal(1);
      expect(before.stdout).to.match(new RegExp(`dev_idp_key\\.private_key_sealed\\s+0\\s+1\\s+${dataKeyId(k1)}: 1`));
      const moved = await custody(['data-key', 'reencrypt', '--json'], keys(k2, k1));
      expect(moved.code, moved.stderr).to.equal(0);
      expect(JSON.parse(moved.stdout)).to.deep.include({ column: 'dev_idp_key.private_key_sealed', moved: 1, unreadable: 0 });
      expect((await custody(['data-key', 'status'], keys(k2))).code).to.equal(0);
      const stored = await db('dev_idp_key').first<{ private_key_sealed: string }>('private_key_sealed');
      expect(new SecretBox(k2).open(stored?.private_key_sealed ?? '', 'custody:dev-idp-key:v1')).to.equal('pkcs8');
      // Under a key it was not given: counted as unreadable, left as it is, exit 1.
      const missing = await custody(['data-key', 'reencrypt', '--json'], keys(k3));
      expect(missing.code).to.equal(1);
      expect(JSON.parse(missing.stdout)).to.deep.include({ column: 'dev_idp_key.private_key_sealed', moved: 0, unreadable: 1 });
      expect(missing.stderr).to.include('add their key to DATA_DECRYPTION_KEYS');
      const noKey = await custody(['data-key', 'status'], { DATABASE_URL: scratch.url });
      expect(noKey.code).to.equal(2);
      expect(noKey.stderr).to.include('DATA_ENCRYPTION_KEY is required');
    } finally {
      await db.destroy();
      await scratch.drop();
    }
  });

  it('runs migrations with progress (then reports up to date), and exits 3 when the service or the database cannot be reached', async () => {
    const scratch = await scratchDatabase();
    try {
      const first = await custody(['migrate'], { DATABASE_URL: scratch.url });
      expect(first.code, first.stderr).to.equal(0);
      expect(first.stderr).to.match(/applying 1\/\d+: \d{14}_foundation\.js/);
      expect(first.stdout).to.match(/foundation\.js\s+applied/);
      const db = createDb({ url: scratch.url, poolMax: 1 });
      const tables = (await db.raw<{ rows: Array<{ n: string }> }>(`SELECT count(*) AS n FROM knex_migrations`)).rows[0]?.n;
      await db.destroy();
      expect(Number(tables)).to.equal((first.stdout.match(/applied/g) ?? []).length);
      const second = await custody(['migrate'], { DATABASE_URL: scratch.url });
      expect(second.code).to.equal(0);
      expect(second.stderr).to.include('up to date');
    } finally {
      await scratch.drop();
    }
    const noDb = await custody(['migrate']);
    expect(noDb.code).to.equal(2);
    expect(noDb.stderr).to.include('DATABASE_URL');
    const down = await custody(['migrate'], { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' });
    expect(down.code).to.equal(3);
    const unreachable = await custody(['tokens', 'list', '--org', '1'], { CUSTODY_URL: 'http://127.0.0.1:1', CUSTODY_TOKEN: 'sk_test_x' });
    expect(unreachable.code).to.equal(3);
    expect(unreachable.stderr).to.include('cannot reach the service at http://127.0.0.1:1');
  });
  it('vault rewrap says what it needs without Vault, and refuses a bad --pace-ms (the run against a real Vault: test/keyvault/rewrap.test.ts)', async () => {
    const noVault = await custody(['vault', 'rewrap']);
    expect(noVault.code, noVault.stderr).to.equal(2);
    expect(noVault.stderr).to.include('VAULT_ADDR is required');
    const badPace = await custody(['vault', 'rewrap', '--pace-ms', 'soon']);
    expect(badPace.code).to.equal(2);
    expect(badPace.stderr).to.include('--pace-ms must be an integer');
  });
  it('answers --version, explains every command with --help (exit 0), lists a group, and refuses an option a command does not take (exit 2)', async () => {
    const v = await custody(['--version']);
    expect(v.code, v.stderr).to.equal(0);
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
    expect(v.stdout.trim()).to.equal(`custody ${pkg.version}`);
    // One command's help as a process; every command's through the same dispatcher in this process (a process each took 40 s on a loaded machine).
    const first = await custody(['orgs', 'list', '--help']);
    expect([first.code, first.stdout.startsWith(`usage: custody ${COMMANDS['orgs list']?.usage}\n`)], first.stdout).to.deep.equal([0, true]);
    for (const [name, command] of Object.entries(COMMANDS)) {
      const help = await custodyHere([...name.split(' '), '--help']);
      expect(help.code, name).to.equal(0);
      expect(help.stdout.startsWith(`usage: custody ${command.usage}\n`), `${name}: ${help.stdout}`).to.equal(true);
      for (const option of Object.keys(command.options ?? {})) expect(help.stdout, name).to.include(`--${option}`);
    }
    const group = await custody(['help', 'webhooks']);
    expect(group.code).to.equal(0);
    expect(group.stdout).to.include('custody webhooks rotate-secret');
    expect(group.stdout).not.to.include('custody orgs list');
    const bare = await custody(['memberships']);
    expect(bare.code).to.equal(2);
    expect(bare.stdout).to.include('custody memberships transfer');
    const unknownOption = await custody(['orgs', 'list', '--frobnicate', 'x'], env);
    expect(unknownOption.code).to.equal(2);
    expect(unknownOption.stderr).to.include('unknown option --frobnicate');
  });

  it('manages organisations and projects: create, list (table and JSON), get, rename, update, rotate a key, delete, undelete', async () => {
    const iss = await idp.issuer('cli-orgs');
    const made = await custody(['orgs', 'create', '--name', 'Nouns Org', '--json'], env);
    expect(made.code, made.stderr).to.equal(0);
    const org = JSON.parse(made.stdout) as { id: number; name: string };
    expect(org.name).to.equal('Nouns Org');
    const table = await custody(['orgs', 'list'], env);
    expect(table.code, table.stderr).to.equal(0);
    expect(table.stdout).to.match(/^id\s+name\s+createdAt\s+deletedAt\n-+/);
    expect(table.stdout).to.match(new RegExp(`^${org.id}\\s+Nouns Org\\s`, 'm'));
    const got = await custody(['orgs', 'get', String(org.id)], env);
    expect(got.code, got.stderr).to.equal(0);
    expect(got.stdout).to.match(/^name\s+Nouns Org$/m);
    const renamed = await custody(['orgs', 'rename', String(org.id), '--name', 'Renamed Org', '--json'], env);
    expect(JSON.parse(renamed.stdout)).to.include({ id: org.id, name: 'Renamed Org' });

    const p = await custody(['projects', 'create', '--org', String(org.id), '--name', 'Shop', '--issuer', iss.issuer, '--json'], env);
    expect(p.code, p.stderr).to.equal(0);
    const created = JSON.parse(p.stdout) as { id: number; projectKey: string };
    expect(created.projectKey).to.match(/^pk_test_/);
    expect(p.stderr).to.include('shown once');
    const projects = await custody(['projects', 'list', '--org', String(org.id), '--json'], env);
    expect((JSON.parse(projects.stdout) as Array<{ id: number }>).map((x) => x.id)).to.deep.equal([created.id]);
    const shown = await custody(['projects', 'get', String(created.id), '--json'], env);
    expect(JSON.parse(shown.stdout)).to.include({ id: created.id, name: 'Shop', issuer: iss.issuer });
    const updated = await custody(['projects', 'update', String(created.id), '--name', 'Store', '--json'], env);
    expect(updated.code, updated.stderr).to.equal(0);
    expect(JSON.parse(updated.stdout)).to.include({ name: 'Store', issuer: iss.issuer });
    expect((await custody(['projects', 'update', String(created.id)], env)).code, 'nothing to change').to.equal(2);
    const rotated = await custody(['projects', 'rotate-key', '--project', String(created.id), '--json'], env);
    expect(rotated.code, rotated.stderr).to.equal(0);
    expect((JSON.parse(rotated.stdout) as { projectKey: string }).projectKey).to.match(/^pk_test_/);
    const deleted = await custody(['projects', 'delete', String(created.id)], env);
    expect(deleted.code, deleted.stderr).to.equal(0);
    expect((await custody(['projects', 'get', String(created.id)], env)).code).to.equal(1);

    expect((await custody(['orgs', 'delete', String(org.id)], env)).code).to.equal(0);
    const withDeleted = await custody(['orgs', 'list', '--show-deleted', '--json'], env);
    expect((JSON.parse(withDeleted.stdout) as Array<{ id: number; deletedAt: string | null }>).find((o) => o.id === org.id)?.deletedAt).to.be.a('string');
    const back = await custody(['orgs', 'undelete', String(org.id), '--json'], env);
    expect(back.code, back.stderr).to.equal(0);
    expect(JSON.parse(back.stdout)).to.include({ id: org.id, deletedAt: null });
  });

  it('looks wallets up by id, e-mail and address; issues, views, transfers and revokes memberships (one, or from a file)', async () => {
    const iss = await idp.issuer('cli-wallets');
    const boot = await custody(['bootstrap', '--org', 'CLI Wallets', '--project', 'p', '--issuer', iss.issuer, '--json'], env);
    const b = JSON.parse(boot.stdout) as { projectId: number; projectKey: string; token: string };
    const admin = { CUSTODY_URL: app.url, CUSTODY_TOKEN: b.token };
    const signin = await app.client.post(
      '/api/v1/signin',
      { key: b.projectKey },
      { token: await iss.sign({ email: 'Wal@Example.com' }, { audience: AUDIENCE }) },
    );
    expect(signin.status, signin.text).to.equal(200);
    const address = signin.body.walletAddress;
    const project = ['--project', String(b.projectId)];

    const all = await custody(['wallets', 'list', ...project], admin);
    expect(all.code, all.stderr).to.equal(0);
    expect(all.stdout).to.match(/^walletId\s+walletAddress\s+emailAddress\s+createdAt/);
    expect(all.stdout).to.include(address);
    const byEmail = await custody(['wallets', 'get', ...project, '--email', 'wal@example.com', '--json'], admin);
    expect(byEmail.code, byEmail.stderr).to.equal(0);
    expect(JSON.parse(byEmail.stdout)).to.include({ walletId: signin.body.walletId, walletAddress: address });
    const byAddress = await custody(['wallets', 'get', ...project, '--address', address.toLowerCase(), '--json'], admin);
    expect(JSON.parse(byAddress.stdout)).to.include({ walletId: signin.body.walletId });
    const byId = await custody(['wallets', 'get', ...project, String(signin.body.walletId)], admin);
    expect(byId.stdout).to.match(new RegExp(`^walletAddress\\s+${address}$`, 'm'));
    const listed = await custody(['wallets', 'list', ...project, '--email', 'nobody@example.com', '--json'], admin);
    expect(JSON.parse(listed.stdout)).to.deep.equal([]);
    const none = await custody(['wallets', 'get', ...project, '--email', 'nobody@example.com'], admin);
    expect(none.code).to.equal(1);
    expect(none.stderr).to.include('no wallet');

    const issued = await custody(['memberships', 'issue', ...project, '--type', 'gym:gold', '--address', address, '--transferable', '--json'], admin);
    expect(issued.code, issued.stderr).to.equal(0);
    const [m] = JSON.parse(issued.stdout) as Array<{ tokenId: string; status: string }>;
    expect(m?.status).to.equal('active');
    const file = path.join(dir, 'memberships.json');
    writeFileSync(file, JSON.stringify([{ membershipType: 'gym:silver', walletAddress: address }]));
    const fromFile = await custody(['memberships', 'issue', ...project, '--file', file], admin);
    expect(fromFile.code, fromFile.stderr).to.equal(0);
    expect(fromFile.stdout).to.match(/^tokenId\s+membershipType\s+walletAddress\s+status/);
    expect(fromFile.stdout).to.include('gym:silver');
    const viewed = await custody(['memberships', 'view', ...project, '--address', address, '--json'], admin);
    expect((JSON.parse(viewed.stdout) as Array<{ membershipType: string }>).map((x) => x.membershipType).sort()).to.deep.equal(['gym:gold', 'gym:silver']);
    const to = '0x000000000000000000000000000000000000dEaD';
    const moved = await custody(['memberships', 'transfer', m?.tokenId ?? '', ...project, '--from', address, '--to', to, '--json'], admin);
    expect(moved.code, moved.stderr).to.equal(0);
    expect(JSON.parse(moved.stdout)).to.include({ walletAddress: to });
    const revoked = await custody(['memberships', 'revoke', m?.tokenId ?? '', ...project, '--json'], admin);
    expect(JSON.parse(revoked.stdout)).to.include({ status: 'revoked' });
    const hard = await custody(['memberships', 'revoke', m?.tokenId ?? '', ...project, '--hard', '--json'], admin);
    expect(hard.code, hard.stderr).to.equal(0);
    expect(JSON.parse(hard.stdout)).to.deep.equal({ deleted: m?.tokenId });
    const after = await custody(['memberships', 'view', ...project, '--type', 'gym:gold', '--include-revoked', '--json'], admin);
    expect(JSON.parse(after.stdout)).to.deep.equal([]);
  });

  it('manages webhook subscriptions (events, create, list, get, update, test, rotate the secret, delete) and failed deliveries (list, retry by id)', async () => {
    const iss = await idp.issuer('cli-hooks');
    receiver.status = 500;
    const boot = await custody(
      ['bootstrap', '--org', 'CLI Hooks', '--project', 'p', '--issuer', iss.issuer, '--wallet-webhook-url', `${receiver.url}/w`, '--json'],
      env,
    );
    const b = JSON.parse(boot.stdout) as { projectId: number; projectKey: string; token: string };
    const admin = { CUSTODY_URL: app.url, CUSTODY_TOKEN: b.token };
    const project = ['--project', String(b.projectId)];

    const events = await custody(['webhooks', 'events', '--json'], admin);
    expect(events.code, events.stderr).to.equal(0);
    const names = (JSON.parse(events.stdout) as Array<{ name: string }>).map((e) => e.name);
    expect(names).to.include('webhook.test');
    const made = await custody(['webhooks', 'create', ...project, '--endpoint', `${receiver.url}/hooks`, '--json'], admin);
    expect(made.code, made.stderr).to.equal(0);
    const hook = JSON.parse(made.stdout) as { id: number; events: string[]; secret: string };
    expect(hook.events).to.deep.equal(['*']);
    expect(hook.secret).to.match(/^whsec_/);
    const table = await custody(['webhooks', 'list', ...project], admin);
    expect(table.stdout).to.match(/^id\s+url\s+events/);
    expect(table.stdout).to.include(`${receiver.url}/hooks`);
    const got = await custody(['webhooks', 'get', ...project, String(hook.id), '--json'], admin);
    expect(JSON.parse(got.stdout)).to.include({ id: hook.id });
    const updated = await custody(['webhooks', 'update', ...project, String(hook.id), '--events', `${names[0]},webhook.test`, '--json'], admin);
    expect(updated.code, updated.stderr).to.equal(0);
    expect((JSON.parse(updated.stdout) as { events: string[] }).events).to.have.members([names[0], 'webhook.test']);
    const tested = await custody(['webhooks', 'test', ...project, String(hook.id), '--json'], admin);
    expect(tested.code, tested.stderr).to.equal(0);
    expect(JSON.parse(tested.stdout)).to.include({ event: 'webhook.test' });
    const secret = await custody(['webhooks', 'rotate-secret', ...project, String(hook.id), '--json'], admin);
    expect(secret.code, secret.stderr).to.equal(0);
    expect((JSON.parse(secret.stdout) as { secret: string }).secret).to.match(/^whsec_/);
    expect((await custody(['webhooks', 'delete', ...project, String(hook.id)], admin)).code).to.equal(0);
    const deleted = await custody(['webhooks', 'list', ...project, '--show-deleted', '--json'], admin);
    expect((JSON.parse(deleted.stdout) as Array<{ id: number; deletedAt: string | null }>)[0]?.deletedAt).to.be.a('string');

    // The wallet-created webhook fails (the receiver answers 500): listed, then retried by id once the receiver is fixed.
    const signin = await app.client.post(
      '/api/v1/signin',
      { key: b.projectKey },
      { token: await iss.sign({ email: 'hooks@example.com' }, { audience: AUDIENCE }) },
    );
    expect(signin.status, signin.text).to.equal(200);
    let failed: Array<{ id: number }> = [];
    await until('the failed wallet delivery', async () => {
      failed = JSON.parse((await custody(['webhooks', 'deliveries', ...project, '--json'], admin)).stdout) as typeof failed;
      return failed.length === 1;
    });
    receiver.status = 204;
    const retried = await custody(['webhooks', 'retry', ...project, String(failed[0]?.id)], admin);
    expect(retried.code, retried.stderr).to.equal(0);
    expect(retried.stdout).to.match(/^id\s+status\n-+\s+-+\n\d+\s+pending$/m);
  });

  it('lists the versions of a signing policy', async () => {
    const iss = await idp.issuer('cli-policy');
    const b = JSON.parse((await custody(['bootstrap', '--org', 'CLI Policy', '--project', 'p', '--issuer', iss.issuer, '--json'], env)).stdout) as {
      projectId: number;
      token: string;
    };
    const admin = { CUSTODY_URL: app.url, CUSTODY_TOKEN: b.token };
    const file = path.join(dir, 'policy-versions.json');
    writeFileSync(file, JSON.stringify({ rules: [{ name: 'any', action: 'allow', method: 'personal_sign' }] }));
    for (const base of ['0', '1'])
      expect((await custody(['policy', 'put', '--project', String(b.projectId), '--file', file, '--if-version', base], admin)).code).to.equal(0);
    const versions = await custody(['policy', 'versions', '--project', String(b.projectId)], admin);
    expect(versions.code, versions.stderr).to.equal(0);
    expect(versions.stdout).to.match(/^version\s+author\s+createdAt\s+policy/);
    expect(
      versions.stdout
        .trim()
        .split('\n')
        .slice(2)
        .map((l) => l.split(/\s+/)[0]),
    ).to.deep.equal(['1', '2']);
  });

  it("prints a development identity provider's token for a user of a testnet project, which signs that user in", async () => {
    const org = await app.client.post('/api/v1/organisations', { name: 'CLI dev' });
    const created = await app.client.post(`/api/v1/organisations/${org.body.id}/projects`, {
      name: 'dev app',
      issuer: 'https://dev-idp.invalid',
      tokenClaim: { name: 'azp', value: `cli-${org.body.id}` },
    });
    expect(created.status, created.text).to.equal(201);
    const token = await custody(['dev', 'token', '--project', String(created.body.id), '--email', 'ada@example.com'], env);
    expect(token.code, token.stderr).to.equal(0);
    const jwt = token.stdout.trim();
    expect(jwt.split('.')).to.have.length(3);
    const signIn = await app.client.post('/api/v1/signin', { key: created.body.projectKey }, { token: jwt });
    expect(signIn.status, signIn.text).to.equal(200);
    const json = await custody(
      ['dev', 'token', '--project', String(created.body.id), '--email', 'bob@example.com', '--unverified', '--ttl-seconds', '600', '--json'],
      env,
    );
    expect(json.code, json.stderr).to.equal(0);
    expect(JSON.parse(json.stdout)).to.include({ issuer: 'https://dev-idp.invalid', audience: 'urn:custody:testnet' });
  });

  it("exports an organisation's audit log with its chain fields and verifies the export against the service's JWKS", async () => {
    const org = await app.client.post('/api/v1/organisations', { name: 'CLI audit' });
    expect(org.status, org.text).to.equal(201);
    for (const name of ['CLI audit 2', 'CLI audit 3']) expect((await app.client.put(`/api/v1/organisations/${org.body.id}`, { name })).status).to.equal(200);
    const file = path.join(dir, 'audit.ndjson');
    // The worker seals within its interval: the export holds the rows once they are sealed.
    await until("the organisation's rows in its export", async () => {
      const exported = await custody(['audit', 'export', '--organisation', String(org.body.id), '--out', file], env);
      expect(exported.code, exported.stderr).to.equal(0);
      return (
        readFileSync(file, 'utf8')
          .split('\n')
          .filter((l) => l.startsWith('{"type":"entry"')).length === 3
      );
    });
    const verified = await custody(['audit', 'verify', '--file', file, '--json'], env);
    expect(verified.code, verified.stderr).to.equal(0);
    expect(JSON.parse(verified.stdout)).to.deep.include({ ok: true, rows: 3, organisationId: org.body.id });
  });

  it('has run every command of its table as a process, and every command the README shows', () => {
    expect(
      [...Object.keys(COMMANDS)].filter((name) => !ran.has(name)),
      'commands no test ran',
    ).to.deep.equal([]);
    // Every command line in the README's code blocks: `custody …` or `npm run custody -- …`.
    const readme = readFileSync('README.md', 'utf8');
    const blocks = [...readme.matchAll(/```[a-z]*\n([\s\S]*?)```/g)].map((m) => m[1] ?? '');
    const lines = blocks
      .flatMap((b) => b.split('\n'))
      .flatMap((l) => [...l.matchAll(/(?:^|\s)(?:npm run custody --|custody)\s+([a-z][a-z-]*(?:\s+[a-z][a-z-]*)?)/g)]);
    const shown = lines.map((m) => {
      const words = (m[1] ?? '').split(/\s+/);
      return [words.join(' '), words[0] ?? ''].find((name) => name in COMMANDS) ?? `(not a command) ${m[0].trim()}`;
    });
    expect(shown.length).to.be.greaterThan(10);
    expect(
      shown.filter((name) => !ran.has(name)),
      'README commands no test ran',
    ).to.deep.equal([]);
    const documented = Object.entries(COMMANDS)
      .filter(([, c]) => c.aliasOf === undefined)
      .map(([name]) => name);
    expect(
      documented.filter((name) => !shown.includes(name)),
      'commands the README does not show',
    ).to.deep.equal([]);
  });
});
