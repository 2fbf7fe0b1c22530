import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { verifyMessage } from 'ethers';
import { createDb } from '../../../src/platform/db/knex.js';
import { startAppWithIdp, type TestApp } from '../../support/app.js';
import type { TestIdp } from '../../support/idp.js';
import { scratchDatabase } from '../../support/process.js';
import type { Receiver } from '../../support/receiver.js';
import { until } from '../../support/wait.js';

const CLI = path.resolve('dist/src/programs/cli/main.js');
const AUDIENCE = 'urn:custody:testnet';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** The CLI as a process, as an operator runs it. */
function custody(args: string[], env: Record<string, string> = {}, cwd = tmpdir()): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { cwd, env: { PATH: process.env['PATH'] ?? '', ...env }, timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

describe('operator CLI (custody)', function () {
  this.timeout(120_000);
  let app: TestApp;
  let idp: TestIdp;
  let receiver: Receiver;
  let dir: string;
  let close: () => Promise<void>;
  let env: Record<string, string>;

  before(async () => {
    ({ app, idp, receiver, dir, close } = await startAppWithIdp({ WALLET_WEBHOOK_BACKGROUND_RETRY: 'false' }));
    env = { CUSTODY_URL: app.url, CUSTODY_TOKEN: app.operatorToken };
  });
  after(() => close());

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
});
