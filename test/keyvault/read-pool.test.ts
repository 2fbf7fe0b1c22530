import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { SignerError } from '../../keyvault/errors.js';
import { LIMITS } from '../../keyvault/limits.js';
import { parsePolicy } from '../../keyvault/policy/document.js';
import { evaluate } from '../../keyvault/policy/evaluate.js';
import { ReadPool } from '../../keyvault/read-pool.js';
import { parseOperation } from '../../keyvault/sign/operation.js';
import { toChecksumAddress } from '../../keyvault/eth.js';
import { LIMIT_CASES, MAXIMAL, typedDataOfValues } from '../support/limits.js';

const body = (operation: unknown) => Buffer.from(JSON.stringify({ caller: 'server', operation }));
const SIG = { r: 1n, s: 2n, yParity: 1 as const };

/**
 * Whether reading off the main thread keeps the event loop free: the longest stall under a quarter
 * of what reading inline holds it, in one of up to three trials. Work on the main thread stalls
 * every trial by its whole length; the kernel's scheduler on a busy 2-core machine can stall any
 * one trial by itself (a CI run failed so).
 */
async function expectFreeLoop(trial: () => Promise<{ stallMs: number; inlineMs: number }>): Promise<void> {
  const trials: Array<{ stallMs: number; inlineMs: number }> = [];
  while (trials.length < 3) {
    const t = await trial();
    trials.push(t);
    if (t.stallMs < t.inlineMs / 4) return;
  }
  expect.fail(trials.map((t) => `worker: ${t.stallMs.toFixed(1)} ms, inline: ${t.inlineMs.toFixed(1)} ms`).join('; '));
}

describe('signer: operations read off the main thread', function () {
  this.timeout(120_000);
  let pool: ReadPool;
  before(() => {
    pool = new ReadPool(1);
  });
  after(async () => {
    await pool.close();
  });

  it('reads every operation alike on either thread: digest, policy fields, typed leaves, answers', async () => {
    const operations = [...Object.values(MAXIMAL).map((m) => m()), ...LIMIT_CASES.map((c) => c.at())];
    const typedRule = {
      rules: [
        { name: 'leaf', action: 'deny', method: 'eth_signTypedData_v4', conditions: [{ field: 'message.f0.0', op: 'eq', value: 'x' }] },
        { name: 'text', action: 'deny', method: 'eth_signTypedData_v4', conditions: [{ field: 'message.text', op: 'prefix', value: 'a' }] },
        { name: 'any', action: 'allow', method: 'eth_signTypedData_v4' },
        { name: 'tx', action: 'allow', method: 'eth_signTransaction', conditions: [{ field: 'data.length', op: 'lte', value: LIMITS.transaction.dataBytes }] },
      ],
    };
    const policy = parsePolicy(typedRule);
    const before = pool.offloaded;
    for (const operation of operations) {
      const here = parseOperation(operation);
      const { envelope, operation: there } = await pool.read('evaluate', body(operation));
      expect(envelope.caller).to.equal('server');
      expect(Buffer.from(there.digest).toString('hex')).to.equal(Buffer.from(here.digest).toString('hex'));
      expect(there.fields).to.deep.equal(here.fields);
      expect(evaluate(policy, there, 'server')).to.deep.equal(evaluate(policy, here, 'server'));
      if (here.typedLeaf) expect(there.typedLeaf?.(['f0', '0'])).to.deep.equal(here.typedLeaf(['f0', '0']));
      expect(await there.answer(SIG)).to.deep.equal(await here.answer(SIG));
    }
    expect(pool.offloaded - before, 'the large ones went to the worker').to.be.greaterThan(operations.length / 2);
  });

  it('keeps small operations on the main thread, within its budget', async () => {
    const before = pool.offloaded;
    await pool.read('evaluate', body({ method: 'personal_sign', params: { message: 'app.example.com wants you to sign in' } }));
    await pool.read('evaluate', body(typedDataOfValues(20)));
    await pool.read('sign', Buffer.from(JSON.stringify({ projectId: randomUUID(), caller: 'user', operation: MAXIMAL['eth_signAuthorization']?.() })));
    expect(pool.offloaded).to.equal(before);
  });

  it("refuses on the worker as on the main thread: the signer's code and the field named", async () => {
    for (const c of LIMIT_CASES) {
      let inline: SignerError | undefined;
      try {
        parseOperation(c.past());
      } catch (err) {
        inline = err as SignerError;
      }
      const there = await pool.read('evaluate', body(c.past())).catch((err: unknown) => err);
      expect(there, c.name).to.be.instanceOf(SignerError);
      expect((there as SignerError).code).to.equal(inline?.code);
      expect((there as SignerError).message).to.equal(inline?.message);
    }
    // The envelope comes first, on the worker too.
    const envelope = await pool
      .read('sign', Buffer.from(JSON.stringify({ projectId: 'x', caller: 'user', operation: MAXIMAL['eth_signTypedData_v4']?.() })))
      .catch((err: unknown) => err);
    expect(envelope).to.be.instanceOf(SignerError).with.property('code', 'invalid_request');
  });

  it('keeps the event loop free while maximal operations are read: the longest stall is a small part of what reading inline holds it', async () => {
    const maximal = body(MAXIMAL['eth_signTypedData_v4']?.());
    // Eight requests, each in its own turn of the event loop as they would arrive.
    const stall = async (reader: ReadPool) => {
      const h = monitorEventLoopDelay({ resolution: 1 });
      h.enable();
      await new Promise((r) => setTimeout(r, 10));
      const reads: Array<Promise<unknown>> = [];
      for (let i = 0; i < 8; i++) {
        reads.push(reader.read('evaluate', maximal));
        await new Promise((r) => setImmediate(r));
      }
      await Promise.all(reads);
      await new Promise((r) => setTimeout(r, 10));
      h.disable();
      return h.max / 1e6;
    };
    await stall(pool);
    const inline = new ReadPool(0);
    // A ratio against the inline reading in the same run, not a fixed bound: these machines are noisy.
    try {
      await expectFreeLoop(async () => ({ stallMs: await stall(pool), inlineMs: await stall(inline) }));
    } finally {
      await inline.close();
    }
  });

  it('reads policies on a worker as on the main thread, refusals too; thousands of checksummed addresses do not hold the event loop', async () => {
    const addresses = Array.from({ length: 7000 }, (_, i) => toChecksumAddress((i * 7919 + 1).toString(16).padStart(40, 'a')));
    const document = {
      rules: Array.from({ length: 7 }, (_, r) => ({
        name: `r${r}`,
        action: 'allow',
        method: 'eth_signTransaction',
        conditions: [{ field: 'to', op: 'in', value: addresses.slice(r * 1000, r * 1000 + 1000) }],
      })),
    };
    await expectFreeLoop(async () => {
      const h = monitorEventLoopDelay({ resolution: 1 });
      h.enable();
      await new Promise((r) => setTimeout(r, 10));
      const there = await pool.policy(document);
      await new Promise((r) => setTimeout(r, 10));
      h.disable();
      const at = performance.now();
      const inline = parsePolicy(document);
      const inlineMs = performance.now() - at;
      expect(there).to.deep.equal(inline);
      return { stallMs: h.max / 1e6, inlineMs };
    });
    const bad = {
      rules: [
        {
          name: 'x',
          action: 'allow',
          method: 'eth_signTransaction',
          conditions: [{ field: 'to', op: 'eq', value: addresses[0]?.replace(/[a-f]/, (c) => c.toUpperCase()) }],
        },
      ],
    };
    const refused = await pool.policy(bad).catch((err: unknown) => err);
    expect(refused).to.be.instanceOf(SignerError).with.property('code', 'invalid_policy');
    expect((refused as SignerError).message).to.include('checksum');
  });

  it('answers 503 busy, retryable, past LIMITS.queue operations waiting', async () => {
    const maximal = body(MAXIMAL['eth_signTypedData_v4']?.());
    const outcomes = await Promise.all(
      Array.from({ length: LIMITS.queue + 8 }, () =>
        pool.read('evaluate', maximal).then(
          () => 'read',
          (err: unknown) => err,
        ),
      ),
    );
    const busy = outcomes.filter((o): o is SignerError => o instanceof SignerError && o.code === 'busy');
    expect(busy.length).to.be.greaterThan(0);
    expect(busy[0]?.status).to.equal(503);
    expect(busy[0]?.retryable).to.equal(true);
    expect(outcomes.filter((o) => o === 'read').length).to.be.at.least(LIMITS.queue);
  });
});
