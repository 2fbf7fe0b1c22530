import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { hashMessage, recoverAddress } from 'ethers';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The shell blocks of the README between its quickstart markers, in order. */
function quickstart(): string {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const section = /<!-- quickstart -->([\s\S]*?)<!-- \/quickstart -->/.exec(readme)?.[1];
  if (!section) throw new Error('README.md has no quickstart section');
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]).join('\n');
}

const portTaken = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port }, () => {
      socket.destroy();
      resolve(true);
    }).on('error', () => resolve(false));
  });

describe('the README quick start, run as written', function () {
  this.timeout(600_000);
  let dir: string;
  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('goes from a clone to a signed-in user, a membership and a signed message', async () => {
    expect(await portTaken(8080), 'the quick start serves on port 8080, which something else holds').to.equal(false);
    // A clone of what is committed, with this build (tsc then has nothing to do).
    dir = mkdtempSync(path.join(tmpdir(), 'custody-quickstart-'));
    chmodSync(dir, 0o755); // the embedded PostgreSQL runs as `postgres` when we are root
    for (const file of execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter(Boolean)) {
      mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      cpSync(path.join(ROOT, file), path.join(dir, file));
    }
    cpSync(path.join(ROOT, 'dist'), path.join(dir, 'dist'), { recursive: true });
    const script = path.join(dir, 'quickstart.sh');
    writeFileSync(script, `set -euo pipefail\n${quickstart()}\nwait\n`);

    const run = spawn('bash', [script], {
      cwd: dir,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, npm_config_fund: 'false', npm_config_audit: 'false' },
    });
    let out = '';
    run.stdout.on('data', (d: Buffer) => (out += d.toString()));
    run.stderr.on('data', (d: Buffer) => (out += d.toString()));
    let code: number | null;
    try {
      code = await new Promise<number | null>((resolve) => run.on('exit', resolve));
    } finally {
      // Whatever the script left behind, its process group goes.
      try {
        process.kill(-(run.pid ?? 0), 'SIGKILL');
      } catch {
        // already gone
      }
    }
    const log = () => `${out.slice(-3000)}\n--- service log ---\n${readFileSync(path.join(dir, '.data/service.log'), 'utf8').slice(-2000)}`;
    expect(code, log()).to.equal(0);

    const wallet = JSON.parse(readFileSync(path.join(dir, '.data/wallet.json'), 'utf8')) as { walletAddress: string; isNew: boolean };
    expect(wallet.isNew).to.equal(true);
    expect(out, log()).to.include('"membershipType":"gym:gold"');
    const signature = /"signature":"(0x[0-9a-f]{130})"/.exec(out)?.[1];
    expect(signature, log()).to.be.a('string');
    expect(recoverAddress(hashMessage('Hello from the quick start'), signature ?? '')).to.equal(wallet.walletAddress);
    // The CLI part: Bob's membership, and the backend's signature with Bob's wallet.
    const bob = JSON.parse(readFileSync(path.join(dir, '.data/bob.json'), 'utf8')) as { walletAddress: string };
    expect(out, log()).to.include('gym:silver');
    const signatures = [...out.matchAll(/"signature": ?"(0x[0-9a-f]{130})"/g)].map((m) => m[1] ?? '');
    expect(signatures, log()).to.have.length(2);
    expect(recoverAddress(hashMessage('Hello from the backend'), signatures[1] ?? '')).to.equal(bob.walletAddress);
    expect(await portTaken(8080), 'the service stopped').to.equal(false);
  });
});
