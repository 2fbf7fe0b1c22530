import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { verifyMessage } from 'ethers';
import { TEST_DEPLOYMENT, TEST_PROJECT } from '../support/keys.js';
import { spawnService } from '../support/process.js';
import { SIGNER_MAIN, startSigner, type RunningSigner } from '../support/signer.js';
import { startDevVault, type DevVault } from '../support/vault.js';

/**
 * KEYVAULT_TOKEN rotated under load, in the order docs/operations.md (section 8) gives: the signer
 * takes the new token and keeps accepting the old (KEYVAULT_TOKEN_PREVIOUS), the API's pods switch
 * to the new one, the signer drops the old. Signers are replaced the way a rolling update does it:
 * the new one serves before the old one stops taking requests and finishes those it has.
 */
describe('keyvault: KEYVAULT_TOKEN rotated under load without a failed request', function () {
  this.timeout(180_000);
  let vault: DevVault;
  let approle: Record<string, string>;
  const dirs: string[] = [];
  const signers: RunningSigner[] = [];

  before(async function () {
    this.timeout(45 * 60_000);
    vault = await startDevVault();
    approle = vault.setup();
  });
  after(async () => {
    for (const s of signers) await s.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    await vault?.stop();
  });

  const start = async (token: string, previous?: string) => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'custody-rotation-'));
    dirs.push(dataDir);
    const s = await startSigner({ VAULT_ADDR: vault.addr, ...approle, ...(previous ? { KEYVAULT_TOKEN_PREVIOUS: previous } : {}) }, { dataDir, token });
    signers.push(s);
    return s;
  };

  it('accepts old and new during the window, refuses the old after it; not one request fails', async () => {
    const oldToken = randomBytes(32).toString('base64url');
    const newToken = randomBytes(32).toString('base64url');
    const names = new Map<string, string>();
    const named = (s: RunningSigner, name: string) => (names.set(s.url, name), s);
    let target = named(await start(oldToken), 's1');
    /** The API's pods: each presents the token it was started with, until it is restarted with the new one. */
    const pods = Array.from({ length: 6 }, () => ({ token: oldToken }));
    const inFlight = new Map<string, number>();
    const served = new Map<string, number>();
    const failures: string[] = [];
    let phase = 'old';
    let running = true;

    const call = async (token: string, method: string, p: string, body: unknown) => {
      const at = target;
      inFlight.set(at.url, (inFlight.get(at.url) ?? 0) + 1);
      try {
        const res = await fetch(`${at.url}${p}`, {
          method,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        const answer = (await res.json()) as Record<string, unknown>;
        if (res.status >= 300) failures.push(`${phase}: ${method} ${p} → ${res.status} ${JSON.stringify(answer)}`);
        else {
          const key = `${names.get(at.url) ?? '?'} ${token === oldToken ? 'old' : 'new'}`;
          served.set(key, (served.get(key) ?? 0) + 1);
        }
        return answer;
      } catch (err) {
        failures.push(`${phase}: ${method} ${p} → ${String(err)}`);
        return {};
      } finally {
        inFlight.set(at.url, (inFlight.get(at.url) ?? 1) - 1);
      }
    };
    const policy = { rules: [{ name: 'any message', action: 'allow', method: 'personal_sign' }] };
    await call(oldToken, 'PUT', `/v1/projects/${TEST_PROJECT}/policy`, { baseVersion: 0, policy });

    /** Each pod in a loop: create a key, sign with it, again. */
    const load = pods.map(async (pod, n) => {
      let i = 0;
      while (running) {
        const keyId = randomUUID();
        const created = await call(pod.token, 'POST', '/v1/keys', {
          keyId,
          requestId: `rotation-${n}-${i++}`,
          purpose: 'wallet',
          deploymentId: TEST_DEPLOYMENT,
          projectId: TEST_PROJECT,
        });
        if (typeof created['address'] !== 'string') continue;
        const message = `rotation ${keyId}`;
        const signed = await call(pod.token, 'POST', `/v1/keys/${keyId}/sign`, {
          projectId: TEST_PROJECT,
          caller: 'server',
          operation: { method: 'personal_sign', params: { message } },
        });
        const signature = (signed['result'] as { signature?: string } | undefined)?.signature;
        if (signature === undefined || verifyMessage(message, signature) !== created['address']) failures.push(`${phase}: a signature not by ${keyId}`);
      }
    });
    const settle = () => new Promise((r) => setTimeout(r, 1_500));
    /** A rolling replacement: the new signer serves first, the old one finishes what it has, then stops. */
    const replace = async (next: RunningSigner) => {
      const previous = target;
      target = next;
      while ((inFlight.get(previous.url) ?? 0) > 0) await new Promise((r) => setTimeout(r, 10));
      await previous.stop();
    };

    await settle();
    // 1. The signer: the new token as its own, the old one still accepted.
    const s2 = named(await start(newToken, oldToken), 's2');
    phase = 'signer new+old';
    await replace(s2);
    await settle();
    // 2. The API's pods, one after another, present the new token.
    phase = 'api switching';
    for (const pod of pods) {
      pod.token = newToken;
      await new Promise((r) => setTimeout(r, 250));
    }
    await settle();
    // 3. The signer drops the old token.
    const s3 = named(await start(newToken), 's3');
    phase = 'signer new only';
    await replace(s3);
    await settle();
    running = false;
    await Promise.all(load);

    expect(failures, failures.slice(0, 5).join('\n')).to.deep.equal([]);
    // Every phase did work, with the token it should have: the old one inside the window too.
    for (const key of ['s1 old', 's2 old', 's2 new', 's3 new']) expect(served.get(key) ?? 0, `${key}: ${JSON.stringify([...served])}`).to.be.greaterThan(10);
    expect(served.get('s1 new') ?? 0).to.equal(0);
    expect(served.get('s3 old') ?? 0).to.equal(0);

    // After the window: the old token is refused, the new one accepted.
    const health = (token: string) => fetch(`${target.url}/v1/health`, { headers: { authorization: `Bearer ${token}` } });
    const refused = await health(oldToken);
    expect(refused.status).to.equal(401);
    expect(await refused.json()).to.deep.include({ code: 'unauthorized' });
    expect((await health(newToken)).status).to.equal(200);
  });

  it('refuses a previous token that is malformed or the same as the current one', async () => {
    const token = 't'.repeat(40);
    for (const [previous, message] of [
      ['short', 'KEYVAULT_TOKEN_PREVIOUS must be 32 to 256 printable ASCII characters'],
      [token, 'KEYVAULT_TOKEN_PREVIOUS is the same as KEYVAULT_TOKEN'],
    ] as const) {
      const svc = spawnService({ KEYVAULT_TOKEN: token, KEYVAULT_TOKEN_PREVIOUS: previous, KEYVAULT_LISTEN: '127.0.0.1:0' }, SIGNER_MAIN);
      expect(await svc.exited, svc.output()).to.equal(1);
      expect(svc.output()).to.include(message);
    }
  });
});
