import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { request } from 'node:http';
import { LIMITS } from '../../keyvault/limits.js';
import { keyRequest } from '../support/keys.js';
import { FAR_PAST_VALUES, MAXIMAL } from '../support/limits.js';
import { signInMessage as hello, siwePolicy as siwe } from '../support/policies.js';
import { startSigner, type RunningSigner } from '../support/signer.js';

/** One call on a kept-alive connection: status and milliseconds. */
function call(s: RunningSigner, method: string, path: string, body?: string): Promise<{ status: number; ms: number; text: string }> {
  const url = new URL(path, s.url);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method, headers: { authorization: `Bearer ${s.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started, text: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

/**
 * The signer process under hostile maximal operations (issue 30): a project's read token (a dry
 * run) or its user (a denied signature) sends the dearest operations the limits allow, one after
 * another on two connections; another project's personal_sign keeps its latency (p50 within twice
 * its figure alone), because the hashing is done off the main thread.
 */
/** The two projects, by their identities (the signer knows no other name for a project). */
const VICTIM = randomUUID();
const ATTACKER = randomUUID();

describe("keyvault: another project's signatures while one sends maximal operations", function () {
  this.timeout(180_000);
  let signer: RunningSigner;
  let victim: string;
  let hostile: string;
  before(async () => {
    // One reading thread, as on a two-core machine by default.
    signer = await startSigner({ KEYVAULT_READ_THREADS: '1' });
    const created = async (name: string, projectId: string) => {
      const r = await call(signer, 'POST', '/v1/keys', JSON.stringify({ ...keyRequest(name), projectId }));
      expect(r.status, r.text).to.equal(201);
      return (JSON.parse(r.text) as { keyId: string }).keyId;
    };
    victim = await created('hostile:victim', VICTIM);
    hostile = await created('hostile:attacker', ATTACKER);
    expect((await call(signer, 'PUT', `/v1/projects/${VICTIM}/policy`, JSON.stringify({ baseVersion: 0, policy: siwe }))).status).to.equal(201);
  });
  after(() => signer.destroy());

  /** At least `n` signatures, one after another, for at least `ms`. */
  const victimSigns = async (n: number, ms = 0): Promise<number[]> => {
    const times: number[] = [];
    const body = JSON.stringify({ projectId: VICTIM, caller: 'user', operation: hello });
    const until = performance.now() + ms;
    for (let i = 0; i < n || performance.now() < until; i++) {
      const r = await call(signer, 'POST', `/v1/keys/${victim}/sign`, body);
      expect(r.status, r.text).to.equal(200);
      times.push(r.ms);
    }
    return times;
  };

  it('answers every maximal operation, and one far past the limits, with its decision or refusal', async () => {
    for (const [method, build] of Object.entries(MAXIMAL)) {
      const evaluated = await call(signer, 'POST', `/v1/projects/${ATTACKER}/policy/evaluate`, JSON.stringify({ caller: 'user', operation: build() }));
      expect(evaluated.status, `${method}: ${evaluated.text.slice(0, 200)}`).to.equal(200);
      const denied = await call(signer, 'POST', `/v1/keys/${hostile}/sign`, JSON.stringify({ projectId: ATTACKER, caller: 'user', operation: build() }));
      expect(denied.status, `${method}: ${denied.text.slice(0, 200)}`).to.equal(403);
    }
    const far = await call(signer, 'POST', `/v1/projects/${ATTACKER}/policy/evaluate`, JSON.stringify({ caller: 'user', operation: FAR_PAST_VALUES() }));
    expect(far.status).to.equal(400);
    expect(far.text.length).to.be.below(LIMITS.refusal.messageChars + 200);
    const over = await call(signer, 'POST', `/v1/projects/${ATTACKER}/policy/evaluate`, `{"caller":"user","operation":${' '.repeat(LIMITS.body.operation)}}`);
    expect(over.status).to.equal(413);
  });

  it('keeps p50 of the other project within twice its figure alone', async () => {
    await victimSigns(50);
    const alone = p50(await victimSigns(60));
    const bodies = [
      JSON.stringify({ caller: 'user', operation: MAXIMAL['eth_signTypedData_v4']?.() }),
      JSON.stringify({ caller: 'user', operation: MAXIMAL['eth_signTransaction']?.() }),
    ];
    let running = true;
    let sent = 0;
    // Two connections, each sending the next maximal operation as soon as the last is answered.
    const attacker = async (k: number) => {
      while (running) {
        const r = await call(
          signer,
          'POST',
          k === 0 ? `/v1/projects/${ATTACKER}/policy/evaluate` : `/v1/keys/${hostile}/sign`,
          k === 0 ? bodies[0] : JSON.stringify({ projectId: ATTACKER, caller: 'user', operation: JSON.parse(bodies[sent % 2] ?? '{}').operation as unknown }),
        );
        expect([200, 403, 503]).to.include(r.status);
        sent++;
      }
    };
    const attackers = [attacker(0), attacker(1)];
    await new Promise((r) => setTimeout(r, 300));
    const loaded = p50(await victimSigns(60, 2_000));
    running = false;
    await Promise.all(attackers);
    expect(sent, 'maximal operations answered meanwhile').to.be.greaterThan(5);
    expect(loaded, `p50 ${loaded.toFixed(1)} ms beside ${sent} maximal operations, ${alone.toFixed(1)} ms alone`).to.be.at.most(2 * alone);
  });
});
