import { execFile, execFileSync, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { hashMessage, recoverAddress } from 'ethers';

const DEMO = path.resolve('dist/scripts/demo.js');

function demo(dataDir: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [DEMO], { env: { PATH: process.env['PATH'] ?? '', DEMO_DATA_DIR: dataDir }, timeout: 240_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

describe('npm run demo (embedded defaults, local HTTPS IdP, webhook receiver)', function () {
  this.timeout(300_000);
  let dir: string;
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'custody-demo-'));
    // The embedded PostgreSQL's `postgres` user (when run as root) must enter it.
    chmodSync(dir, 0o755);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('prints every step: a wallet, its verified wallet-created webhook, an issued and viewed membership, a SIWE message signed under policy; and runs again on the same data', async () => {
    for (const run of [1, 2]) {
      const r = await demo(path.join(dir, 'data'));
      expect(r.code, `run ${run}: ${r.stderr}`).to.equal(0);
      for (let n = 1; n <= 9; n++) expect(r.stdout, `run ${run}`).to.include(`[${n}] `);
      const address = /"walletAddress": "(0x[0-9a-fA-F]{40})"/.exec(r.stdout)?.[1];
      expect(address, r.stdout).to.be.a('string');
      expect(r.stdout).to.match(/webhook-id msg_[0-9a-f]+: signature valid/);
      // The verified webhook body is the wallet's, with the token given at sign-in.
      expect(r.stdout).to.include('"token": "demo-signup"');
      expect(r.stdout.match(new RegExp(`"walletAddress": "${address}"`, 'g'))?.length).to.be.at.least(4);
      expect(r.stdout).to.match(/"membershipType": "gym:gold",[\s\S]*"status": "active"/);
      // A sign-in-with-Ethereum message signed under the policy the demo set, checked with viem; anything else refused.
      expect(r.stdout).to.match(new RegExp(`verified with viem for ${address}: valid`));
      expect(r.stdout).to.match(/anything else is refused: 403 policy_denied/);
      // anvil is a dev dependency here: the user's send on it is followed to confirmed.
      expect(r.stdout).to.match(/transaction \d+: confirmed at nonce \d+, hash 0x[0-9a-f]{64}/);
      expect(r.stdout).to.match(/API reference of this service: http:\/\/127\.0\.0\.1:\d+\/docs/);
    }
  });

  it('with --keep, prints everything needed to go on by hand, and the commands it prints work', async () => {
    const child = spawn(process.execPath, [DEMO, '--keep'], {
      env: { PATH: process.env['PATH'] ?? '', DEMO_DATA_DIR: path.join(dir, 'kept') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      const deadline = Date.now() + 240_000;
      while (!out.includes('A fresh user token') && Date.now() < deadline && child.exitCode === null) await new Promise((r) => setTimeout(r, 200));
      expect(out).to.include('A fresh user token');
      // The printed assignments and commands, run by a shell as a user would paste them.
      const lines = out.split('\n').map((l) => l.trim());
      const vars = lines.filter((l) => /^[A-Z_]+=\S+/.test(l)).map((l) => l.replace(/\s+#.*$/, ''));
      expect(vars.map((v) => v.split('=')[0])).to.include.members([
        'API',
        'OPERATOR_TOKEN',
        'PROJECT',
        'PROJECT_KEY',
        'PROJECT_ADMIN_TOKEN',
        'USER_JWT',
        'WALLET',
      ]);
      const commands = lines.filter((l) => l.startsWith('curl '));
      expect(commands).to.have.length(2);
      const [view, sign] = commands.map((c) => execFileSync('bash', ['-c', `${vars.join('\n')}\n${c}`], { encoding: 'utf8' }));
      const wallet = /^WALLET=(0x[0-9a-fA-F]{40})$/m.exec(vars.join('\n'))?.[1] ?? '';
      expect(JSON.parse(view ?? '{}').memberships[0]).to.include({ membershipType: 'gym:gold', status: 'active' });
      const { signature } = JSON.parse(sign ?? '{}') as { signature: string };
      const message = /"message\\":\\"([^\\]*)\\"/.exec(commands[1] ?? '')?.[1] ?? '';
      expect(recoverAddress(hashMessage(message), signature)).to.equal(wallet);
    } finally {
      child.kill('SIGINT');
      await exited;
    }
  });
});
