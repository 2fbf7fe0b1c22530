import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';

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
      expect(r.stdout).to.match(/API reference of this service: http:\/\/127\.0\.0\.1:\d+\/docs/);
    }
  });
});
