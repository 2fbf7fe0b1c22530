import { expect } from 'chai';
import { startAnvil, startFaultProxy, type Anvil, type Fault, type FaultProxy } from '../../support/anvil.js';
import { GWEI, sendingProject, startChainEnv, type ChainEnv, type Sender } from '../../support/chain.js';
import { until } from '../../support/wait.js';

const BOB = '0x0000000000000000000000000000000000000B0b';

interface Tx {
  id: number;
  status: string;
  nonce: string | null;
  hash: string | null;
  waiting: string | null;
  blockNumber: string | null;
  error?: { code: string; message: string } | null;
  attempts?: Array<{ hash: string; purpose: string; gas: string; maxFeePerGas: string; status: string }>;
}

const send = async (env: ChainEnv, s: Sender, wallet: number, body: Record<string, unknown> = {}) => {
  const r = await s.signer.post(`/api/v1/project/${s.projectId}/wallets/${s.wallets[wallet]!.id}/transactions`, {
    chainId: env.anvil.chainId,
    to: BOB,
    value: '1',
    ...body,
  });
  expect(r.status, r.text).to.equal(202);
  return r.body as Tx;
};
/** A send followed to its broadcast: a 202 may answer it queued when the worker held its wallet's queue at that moment. */
const submitted = async (s: Sender, sent: Tx): Promise<Tx> =>
  until('submitted', async () => {
    const t = await get(s, sent.id);
    return t.hash !== null && t.status !== 'queued' && t.status !== 'signed' ? t : undefined;
  });
const get = async (s: Sender, id: number): Promise<Tx> => {
  const r = await s.signer.get(`/api/v1/project/${s.projectId}/transactions/${id}`);
  expect(r.status, r.text).to.equal(200);
  return r.body as Tx;
};
const allIn = async (s: Sender, ids: number[], statuses: string[], what: string, timeoutMs = 60_000) =>
  until(
    what,
    async () => {
      const txs = await Promise.all(ids.map((id) => get(s, id)));
      return txs.every((t) => statuses.includes(t.status)) ? txs : undefined;
    },
    timeoutMs,
  );
/** The events of a project's transactions the app recorded, in order, from the outbox (no subscription needed: the audit log names each). */
const auditOf = async (env: ChainEnv, s: Sender, id: number): Promise<string[]> => {
  const r = await env.app.client.get(`/api/v1/organisations/${s.organisationId}/audit?limit=1000`);
  return (r.body.entries as unknown as Array<{ action: string; target: string; details: { sequence: number } }>)
    .filter((e) => e.target === `transaction:${id}`)
    .sort((a, b) => a.details.sequence - b.details.sequence)
    .map((e) => e.action.replace('wallet.transaction.', ''));
};

/** Waits until the app has made `n` more settling passes that found work. */
const settlingPasses = async (env: ChainEnv, n: number): Promise<void> => {
  const passes = () =>
    env.app.logs
      .join('')
      .split('\n')
      .filter((l) => l.includes('"task":"transactions-settle","result":1')).length;
  const from = passes();
  await until(`${n} settling passes`, () => (passes() >= from + n ? true : undefined));
};

describe('transactions: many wallets at once, contiguous nonces, nothing twice', function () {
  this.timeout(300_000);
  let env: ChainEnv;
  before(async () => {
    // Automine and a block a second: anvil's automine alone leaves concurrent arrivals in its pool.
    env = await startChainEnv({ chain: { confirmations: 1 }, anvil: { blockTime: 1, args: ['--mixed-mining'] } });
  });
  after(() => env.close());

  it('100 wallets × 20 concurrent sends: all mined, nonces 0..19 per wallet, one on-chain transaction per send', async () => {
    const s = await sendingProject(env, 100);
    const sends = await Promise.all(s.wallets.flatMap((_, w) => Array.from({ length: 20 }, (_, i) => send(env, s, w, { value: String(i + 1) }))));
    const done = await allIn(
      s,
      sends.map((t) => t.id),
      ['confirmed'],
      'all 2,000 confirmed',
      240_000,
    );
    for (const w of s.wallets) {
      expect(BigInt(await env.anvil.rpc<string>('eth_getTransactionCount', [w.address, 'latest'])), w.address).to.equal(20n);
    }
    const byWallet = new Map<string, string[]>();
    for (const t of done) {
      const tx = await env.anvil.rpc<{ from: string; nonce: string }>('eth_getTransactionByHash', [t.hash]);
      expect(BigInt(tx.nonce).toString()).to.equal(t.nonce);
      byWallet.set(tx.from, [...(byWallet.get(tx.from) ?? []), t.nonce ?? '']);
    }
    for (const [from, nonces] of byWallet) {
      expect(
        nonces.map(Number).sort((a, b) => a - b),
        from,
      ).to.deep.equal(Array.from({ length: 20 }, (_, i) => i));
    }
  });
});

describe('transactions: a reorg sends the same bytes again; nothing is confirmed before its depth', function () {
  this.timeout(120_000);
  let env: ChainEnv;
  before(async () => {
    env = await startChainEnv({ chain: { confirmations: 8 } });
  });
  after(() => env.close());

  for (const depth of [1, 3, 5]) {
    it(`a reorg of depth ${depth}`, async () => {
      const s = await sendingProject(env);
      // Blocks between the wallet's funding and its sends: a reorg deeper than the sends' blocks (sends batched into one) keeps the funds.
      await env.anvil.rpc('anvil_mine', ['0x5']);
      const sent: Tx[] = [];
      for (let i = 0; i < 5; i++) sent.push(await send(env, s, 0, { value: String(i + 1) }));
      const mined = await allIn(
        s,
        sent.map((t) => t.id),
        ['mined'],
        'mined',
      );
      const hashes = mined.map((t) => t.hash);
      // The last `depth` blocks are replaced by empty ones: the transactions in them leave the canonical chain.
      // Sends that arrive together go out in one batch, which the node may mine in one block: which ones leave is read from their blocks.
      const head = BigInt(await env.anvil.rpc<string>('eth_blockNumber'));
      await env.anvil.rpc('anvil_reorg', [depth, []]);
      const reorged = mined.filter((t) => BigInt(t.blockNumber ?? '0') > head - BigInt(depth));
      expect(reorged.length, 'the last send is in the last block').to.be.greaterThan(0);
      await until('the reorged ones seen', async () => {
        const events = await Promise.all(reorged.map((t) => auditOf(env, s, t.id)));
        return events.every((e) => e.includes('reorged')) ? true : undefined;
      });
      // A chain goes on making blocks: one per look (it also mines what anvil's automine left in its pool).
      const confirmed = await until('all confirmed after the reorg', async () => {
        await env.anvil.rpc('anvil_mine', ['0x1']);
        const txs = await Promise.all(sent.map((t) => get(s, t.id)));
        return txs.every((t) => t.status === 'confirmed') ? txs : undefined;
      });
      expect(
        confirmed.map((t) => t.hash),
        'the same bytes were mined again',
      ).to.deep.equal(hashes);
      for (const t of confirmed) {
        const events = await auditOf(env, s, t.id);
        const reorgedAt = events.indexOf('reorged');
        expect(events.indexOf('confirmed'), events.join(' ')).to.equal(events.length - 1);
        if (reorged.some((r) => r.id === t.id)) expect(reorgedAt, events.join(' ')).to.be.greaterThan(-1);
        else expect(reorgedAt).to.equal(-1);
        const receipt = await env.anvil.rpc<{ blockNumber: string } | null>('eth_getTransactionReceipt', [t.hash]);
        expect(receipt, 'on the canonical chain').to.not.equal(null);
      }
      expect(new Set(confirmed.map((t) => t.nonce)).size).to.equal(5);
    });
  }
});

describe('transactions: a send never signed within its time expires', function () {
  this.timeout(60_000);
  let env: ChainEnv;
  before(async () => {
    // Every send waits: the market is above the cap, and nothing of the chain is in flight (nothing to settle).
    env = await startChainEnv({ chain: { maxFeePerGas: String(10n * GWEI), confirmations: 1, queuedTtlMs: 1_000 } });
    await env.anvil.rpc('anvil_setNextBlockBaseFeePerGas', [`0x${(20n * GWEI).toString(16)}`]);
    await env.anvil.rpc('evm_mine');
  });
  after(() => env.close());

  it('on a chain with nothing to settle: expired after queuedTtlMs, with its event, its nonce never taken', async () => {
    const s = await sendingProject(env);
    const t = await send(env, s, 0, { value: '1' });
    expect(t.status).to.equal('queued');
    const expired = await until('expired', async () => {
      const x = await get(s, t.id);
      return x.status === 'expired' ? x : undefined;
    });
    expect([expired.nonce, expired.hash, expired.waiting]).to.deep.equal([null, null, null]);
    expect(await auditOf(env, s, t.id)).to.deep.equal(['queued', 'expired']);
  });
});

describe('transactions: fees above the cap wait instead of jamming', function () {
  this.timeout(120_000);
  let env: ChainEnv;
  before(async () => {
    env = await startChainEnv({ chain: { maxFeePerGas: String(10n * GWEI), confirmations: 1, blockTimeMs: 1000 }, anvil: { blockTime: 1 } });
  });
  after(() => env.close());

  it('a base-fee spike ×20: nothing signed above the cap; the queue drains within 3 blocks after fees fall', async () => {
    const s = await sendingProject(env);
    const base = BigInt(await env.anvil.rpc<string>('eth_gasPrice'));
    await env.anvil.rpc('anvil_setNextBlockBaseFeePerGas', [`0x${(20n * GWEI).toString(16)}`]);
    await env.anvil.rpc('evm_mine');
    const spiked = await Promise.all(Array.from({ length: 10 }, (_, i) => send(env, s, 0, { value: String(i + 1) })));
    for (const t of spiked) expect(t.status, JSON.stringify(t)).to.equal('queued');
    // The queue waits at its oldest send (concurrent requests are not accepted in the order they were made).
    const oldest = Math.min(...spiked.map((t) => t.id));
    await until('the queue says why it waits', async () => ((await get(s, oldest)).waiting === 'fees_above_cap' ? true : undefined));
    // Blocks go by at the spiked fee: nothing moves.
    await env.anvil.rpc('anvil_setNextBlockBaseFeePerGas', [`0x${(20n * GWEI).toString(16)}`]);
    await new Promise((r) => setTimeout(r, 1500));
    for (const t of spiked) expect((await get(s, t.id)).status).to.equal('queued');
    await env.anvil.rpc('anvil_setNextBlockBaseFeePerGas', [`0x${(base > GWEI ? base : GWEI).toString(16)}`]);
    // The next block is the first at the fallen base fee.
    const fallen = BigInt(await env.anvil.rpc<string>('eth_blockNumber')) + 1n;
    const drained = await allIn(
      s,
      spiked.map((t) => t.id),
      ['mined', 'confirmed'],
      'drained',
      30_000,
    );
    for (const t of drained) expect(Number(BigInt(t.blockNumber ?? '0') - fallen), `${t.id} within 3 blocks`).to.be.at.most(3);
    for (const t of drained) {
      const full = await get(s, t.id);
      for (const a of full.attempts ?? []) expect(BigInt(a.maxFeePerGas) <= 10n * GWEI, `${a.maxFeePerGas} under the cap`).to.equal(true);
    }
  });
});

describe('transactions: a dropped transaction goes again with the same bytes', function () {
  this.timeout(120_000);
  let env: ChainEnv;
  before(async () => {
    env = await startChainEnv({ chain: { confirmations: 1, stuckAfterMs: 600_000 } });
    await env.anvil.rpc('evm_setAutomine', [false]);
  });
  after(() => env.close());

  it('anvil_dropTransaction: the settling pass sends the recorded bytes again, and they are mined', async () => {
    const s = await sendingProject(env);
    const t = await submitted(s, await send(env, s, 0));
    expect(t.status).to.equal('submitted');
    // anvil answers the hash it dropped (the worker may have sent it again before a lookup here could see it gone).
    expect(await env.anvil.rpc('anvil_dropTransaction', [t.hash])).to.equal(t.hash);
    await until('in the pool again', async () => ((await env.anvil.rpc('eth_getTransactionByHash', [t.hash])) !== null ? true : undefined));
    await env.anvil.rpc('evm_mine');
    const done = await until('confirmed', async () => {
      const x = await get(s, t.id);
      return x.status === 'confirmed' ? x : undefined;
    });
    expect(done.hash).to.equal(t.hash);
    expect(done.attempts?.map((a) => a.purpose)).to.deep.equal(['send']);
  });

  it('a transaction deep enough when its receipt is found is mined and confirmed in one pass: both events and audit entries, in their order', async () => {
    const s = await sendingProject(env);
    const hook = await s.admin.post(`/api/v1/project/${s.projectId}/webhooks`, { url: `${env.receiver.url}?p=${s.projectId}`, events: ['*'] });
    expect(hook.status, hook.text).to.equal(201);
    const t = await submitted(s, await send(env, s, 0));
    expect(t.status).to.equal('submitted');
    // One block, one confirmation: the pass that finds the receipt finds it deep enough.
    await env.anvil.rpc('evm_mine');
    const done = await until('confirmed', async () => {
      const x = await get(s, t.id);
      return x.status === 'confirmed' ? x : undefined;
    });
    expect(done.blockNumber).to.not.equal(null);
    const order = ['queued', 'signed', 'submitted', 'mined', 'confirmed'];
    // The outbox's ids and the audit log's follow the events' order (a reader by id sees mined before confirmed).
    const events = await env.app.db('outbox').where({ project_id: s.projectId, kind: 'event' }).orderBy('id').select<Array<{ payload: string }>>('payload');
    const recorded = events
      .flatMap((e) => JSON.parse(e.payload) as Array<{ type: string; data: { id: number; sequence: number } }>)
      .filter((e) => e.data.id === t.id);
    expect(recorded.map((e) => `${e.data.sequence} ${e.type.replace('wallet.transaction.', '')}`)).to.deep.equal(order.map((o, i) => `${i + 1} ${o}`));
    const audit = await env.app
      .db('audit_log')
      .where({ target: `transaction:${t.id}` })
      .orderBy('id')
      .select<Array<{ action: string }>>('action');
    expect(audit.map((a) => a.action.replace('wallet.transaction.', ''))).to.deep.equal(order);
    const row = await env.app.db('transactions').where({ id: t.id }).first<{ sequence: number; events: string[] }>('sequence', 'events');
    expect(row?.sequence).to.equal(5);
    expect(row?.events.map((e) => e.replace('wallet.transaction.', ''))).to.deep.equal(order);
    // Delivered in their order, each once.
    const delivered = await until('five deliveries', () => {
      const got = env.receiver.received
        .filter((r) => r.body.includes(`"projectId":${s.projectId}`))
        .map((r) => JSON.parse(r.body) as { type: string; data: { id: number; sequence: number } })
        .filter((e) => e.data.id === t.id);
      return got.length >= 5 ? got : undefined;
    });
    expect(delivered.map((e) => e.data.sequence)).to.deep.equal([1, 2, 3, 4, 5]);
  });
});

describe('transactions: an RPC URL failing half the time', function () {
  this.timeout(180_000);
  let env: ChainEnv;
  let flaky: FaultProxy;
  let steady: FaultProxy;
  before(async () => {
    const faults: Fault[] = ['429', '500', '502', 'timeout', 'garbage', 'reset'];
    env = await startChainEnv({
      chain: { confirmations: 1, rpcTimeoutMs: 300, rpcCooldownMs: 100 },
      rpcUrls: async (anvil) => {
        flaky = await startFaultProxy(anvil.url);
        steady = await startFaultProxy(anvil.url);
        // Every other request fails, in each way a provider fails.
        flaky.setFaults((n) => (n % 2 === 0 ? (faults[(n / 2) % faults.length] ?? 'ok') : 'ok'));
        return [flaky.url, steady.url];
      },
    });
  });
  after(async () => {
    await env.close();
    await flaky.stop();
    await steady.stop();
  });

  it('sends go on through the next URL; "nonce too low" and "already known" are answers, not faults', async () => {
    const s = await sendingProject(env);
    const sent = await Promise.all(Array.from({ length: 20 }, (_, i) => send(env, s, 0, { value: String(i + 1) })));
    // Sends in batches make few calls: more go one at a time until the URL has failed in every way.
    const kinds = ['429', '500', '502', 'timeout', 'garbage', 'reset'] as const;
    while (kinds.some((f) => flaky.seen[f] === 0) && sent.length < 80) sent.push(await send(env, s, 0, { value: String(sent.length + 1) }));
    const done = await allIn(
      s,
      sent.map((t) => t.id),
      ['confirmed'],
      'all confirmed through the faults',
      120_000,
    );
    expect(new Set(done.map((t) => t.nonce)).size).to.equal(sent.length);
    for (const f of kinds) expect(flaky.seen[f], f).to.be.greaterThan(0);
    expect(steady.seen.ok, 'the next URL served').to.be.greaterThan(0);

    // A crash after a broadcast and before it was recorded: the settling pass sends the same bytes
    // again and the node says "nonce too low" (it is mined): read as the transaction's state.
    flaky.setFaults(() => 'ok');
    // The faults set the first URL aside for a while: after that it is first again. A 'timeout'
    // fault still in flight sets it aside when it times out (300 ms) for another 100 ms: wait both.
    await new Promise((r) => setTimeout(r, 300 + 100 + 200));
    const last = done[done.length - 1]!;
    // The row as a crash between preparing the attempt and recording its signature leaves it:
    // the same fields are signed again (the same bytes), and the node answers "nonce too low".
    await env.app.db('transactions').where({ id: last.id }).update({ status: 'queued', hash: null, block_number: null, block_hash: null, receipt: null });
    await env.app.db('transaction_attempts').where({ transaction_id: last.id }).update({ status: 'prepared', hash: null, raw: null });
    const steadyBefore = steady.seen.ok;
    const again = await until('mined again from the record', async () => {
      const x = await get(s, last.id);
      return x.status === 'confirmed' ? x : undefined;
    });
    expect(again.hash).to.equal(last.hash);
    expect(again.attempts?.map((a) => a.purpose)).to.deep.equal(['send']);
    expect(steady.seen.ok, "the first URL was not set aside for the node's answer").to.equal(steadyBefore);
  });
});

describe('transactions: a wallet without funds waits for them', function () {
  this.timeout(120_000);
  let env: ChainEnv;
  before(async () => {
    env = await startChainEnv({ chain: { confirmations: 1, stuckAfterMs: 300 } });
  });
  after(() => env.close());

  it('a send the node refuses for lack of funds is not re-priced while it waits; funded, it goes with the bytes it was refused with', async () => {
    const s = await sendingProject(env);
    const wallet = s.wallets[0]!;
    await env.anvil.fund(wallet.address, 0n);
    const sent = await send(env, s, 0, { value: '0' });
    const refused = await until('waiting for funds', async () => {
      const t = await get(s, sent.id);
      return t.waiting === 'insufficient_funds' ? t : undefined;
    });
    // Settling passes over at least three stuck times (300 ms; a pass at most every 100 ms): a stuck send would be re-priced in them.
    await settlingPasses(env, 12);
    const waited = await get(s, sent.id);
    expect(waited.waiting).to.equal('insufficient_funds');
    expect(
      waited.attempts?.map((a) => a.hash),
      'no fee bump while it waits for funds',
    ).to.deep.equal(refused.attempts?.map((a) => a.hash));
    expect(waited.attempts).to.have.length(1);
    await env.anvil.fund(wallet.address, 10n ** 18n);
    const done = await allIn(s, [sent.id], ['confirmed'], 'confirmed once funded');
    expect(done[0]!.hash).to.equal(refused.hash);
  });
});

describe("transactions: one project's transactions that stay unsettled hold no other's back", function () {
  this.timeout(120_000);
  let env: ChainEnv;
  before(async () => {
    // A settling pass looks at two transactions: fewer than one project keeps waiting for funds.
    env = await startChainEnv({ chain: { confirmations: 1 }, env: { TRANSACTIONS_SETTLE_WINDOW: '2' } });
  });
  after(() => env.close());

  it("another project's send is confirmed while three earlier sends wait for funds (the first two every pass looked at never changed)", async () => {
    const waiting = await sendingProject(env, 3);
    const unfunded = [];
    for (let w = 0; w < 3; w++) {
      await env.anvil.fund(waiting.wallets[w]!.address, 0n);
      unfunded.push(await send(env, waiting, w, { value: '0' }));
    }
    for (const t of unfunded) await until('waiting for funds', async () => ((await get(waiting, t.id)).waiting === 'insufficient_funds' ? true : undefined));
    const other = await sendingProject(env);
    const sent = await send(env, other, 0, { value: '1' });
    await allIn(other, [sent.id], ['confirmed'], 'the other project confirmed', 15_000);
    for (const t of unfunded) expect((await get(waiting, t.id)).waiting, 'still waiting for funds').to.equal('insufficient_funds');
  });
});

describe('transactions: stuck ones are re-priced within the caps; cancel and speed-up', function () {
  this.timeout(120_000);
  let env: ChainEnv;
  before(async () => {
    env = await startChainEnv({ chain: { confirmations: 1, stuckAfterMs: 400 } });
    await env.anvil.rpc('evm_setAutomine', [false]);
  });
  after(() => env.close());

  it('a stuck send gets a fee bump of at least the chain bump at its nonce; a speed-up does it at once; a cancel is a no-op that is mined in its place', async () => {
    const s = await sendingProject(env);
    const t = await send(env, s, 0);
    const bumped = await until('re-priced', async () => {
      const x = await get(s, t.id);
      return (x.attempts?.length ?? 0) >= 2 ? x : undefined;
    });
    const [a, b] = bumped.attempts!;
    expect(b!.purpose).to.equal('speedUp');
    expect(BigInt(b!.maxFeePerGas) * 100n >= BigInt(a!.maxFeePerGas) * 112n, 'at least the chain bump').to.equal(true);
    expect(BigInt(b!.maxFeePerGas) <= 50n * GWEI, 'within the cap').to.equal(true);

    const u = await submitted(s, await send(env, s, 0, { value: '2' }));
    const sped = await s.signer.post(`/api/v1/project/${s.projectId}/transactions/${u.id}/speed-up`, {});
    expect(sped.status, sped.text).to.equal(200);
    expect((await get(s, u.id)).attempts?.map((x) => x.purpose)).to.include('speedUp');
    const cancelled = await s.signer.post(`/api/v1/project/${s.projectId}/transactions/${u.id}/cancel`, {});
    expect(cancelled.status, cancelled.text).to.equal(200);
    await until('the cancel signed', async () => ((await get(s, u.id)).attempts?.some((x) => x.purpose === 'cancel') ? true : undefined));
    await env.anvil.rpc('evm_mine');
    const done = await until('settled', async () => {
      const x = await get(s, u.id);
      return x.status === 'cancelled' ? x : undefined;
    });
    const mined = await env.anvil.rpc<{ to: string; value: string }>('eth_getTransactionByHash', [done.hash]);
    expect(mined.to.toLowerCase(), 'the no-op went to the wallet itself').to.equal(s.wallets[0]!.address.toLowerCase());
    expect(BigInt(mined.value)).to.equal(0n);
    expect((await get(s, t.id)).status).to.be.oneOf(['mined', 'confirmed']);
    const again = await s.signer.post(`/api/v1/project/${s.projectId}/transactions/${u.id}/cancel`, {});
    expect(again.status).to.equal(409);
  });

  it('cancels from a wallet whose EIP-7702 code reverts the no-op: priced as a transfer to an account without code, mined reverted, the send cancelled', async () => {
    const s = await sendingProject(env);
    const wallet = s.wallets[0]!.address;
    const t = await submitted(s, await send(env, s, 0, { value: '3' }));
    // The wallet delegates to code that reverts every call (PUSH1 0 PUSH1 0 REVERT).
    const reverter = '0x000000000000000000000000000000000000dE1e';
    await env.anvil.rpc('anvil_setCode', [reverter, '0x60006000fd']);
    await env.anvil.rpc('anvil_setCode', [wallet, `0xef0100${reverter.slice(2).toLowerCase()}`]);
    const cancelled = await s.signer.post(`/api/v1/project/${s.projectId}/transactions/${t.id}/cancel`, {});
    expect(cancelled.status, cancelled.text).to.equal(200);
    const cancel = await until('the cancel signed', async () => (await get(s, t.id)).attempts?.find((x) => x.purpose === 'cancel'));
    expect(BigInt(cancel.gas), 'the estimate of a transfer to an account without code, and the margin').to.equal(25_200n);
    await env.anvil.rpc('evm_mine');
    const done = await until('settled', async () => {
      const x = await get(s, t.id);
      return x.status === 'cancelled' ? x : undefined;
    });
    expect(done.hash).to.equal(cancel.hash);
    expect(await env.anvil.rpc<{ status: string }>('eth_getTransactionReceipt', [done.hash])).to.include({ status: '0x0' });
  });

  it('a bump or a cancel the policy refuses is not asked for again every pass: the send stays in the pool, saying why', async () => {
    const s = await sendingProject(env, 1, {
      rules: [{ name: 'originals only', action: 'allow', method: 'eth_sendTransaction', conditions: [{ field: 'purpose', op: 'eq', value: 'send' }] }],
    });
    const t = await submitted(s, await send(env, s, 0));
    await until('the automatic bump refused', async () => ((await get(s, t.id)).waiting === 'policy_denied' ? true : undefined));
    const denials = async () => {
      const r = await env.app.client.get(`/api/v1/organisations/${s.organisationId}/audit?limit=1000`);
      return (r.body.entries as unknown as Array<{ action: string }>).filter((e) => e.action === 'wallet.signature.denied').length;
    };
    // Over more than three stuck times (400 ms), the refused bump is not asked for again.
    await settlingPasses(env, 16);
    expect(await denials(), 'one refusal').to.equal(1);
    const cancel = await s.signer.post(`/api/v1/project/${s.projectId}/transactions/${t.id}/cancel`, {});
    expect(cancel.status, cancel.text).to.equal(200);
    await settlingPasses(env, 4);
    // The request asks at once; a settling pass that read the cancel requested at that moment may ask once too.
    const afterCancel = await denials();
    expect(afterCancel, 'the cancel refused').to.be.within(2, 3);
    await settlingPasses(env, 16);
    expect(await denials(), 'the cancel not asked for again').to.equal(afterCancel);
    const waiting = await get(s, t.id);
    expect(waiting.status).to.equal('submitted');
    expect(waiting.waiting).to.equal('policy_denied');
    expect(waiting.attempts?.map((a) => a.purpose)).to.deep.equal(['send']);
    // Its bytes are still the node's: mined as they are.
    await env.anvil.rpc('evm_mine');
    expect((await allIn(s, [t.id], ['mined', 'confirmed'], 'mined'))[0]!.hash).to.equal(t.hash);
  });
});

describe('transactions: a URL that answers another chain id is never used', function () {
  this.timeout(60_000);
  let env: ChainEnv;
  let other: Anvil;
  let watched: FaultProxy;
  before(async () => {
    other = await startAnvil({ chainId: 4242 });
    watched = await startFaultProxy(other.url);
    env = await startChainEnv({ chain: { confirmations: 1 }, rpcUrls: (anvil) => [watched.url, anvil.url] });
  });
  after(async () => {
    await env.close();
    await watched.stop();
    await other.stop();
  });

  it('checked at start and before use: sends go to the URL of the right chain', async () => {
    await until('the check at start', () => (env.app.logs.some((l) => l.includes('answer another chain id')) ? true : undefined));
    const s = await sendingProject(env);
    const t = await send(env, s, 0);
    const done = await until('confirmed', async () => {
      const x = await get(s, t.id);
      return x.status === 'confirmed' ? x : undefined;
    });
    expect(await env.anvil.rpc('eth_getTransactionReceipt', [done.hash])).to.not.equal(null);
    expect(watched.seen.ok, 'the wrong chain was asked its id only').to.equal(1);
  });
});

describe('transactions: the gas of a plain transfer', function () {
  this.timeout(120_000);
  // An account whose code stores a word (22,100 gas and more when run): a transfer to it is no plain transfer.
  const CAROL = '0x000000000000000000000000000000000000ca01';
  const gasOfSend = async (env: ChainEnv, s: Sender, body: Record<string, unknown>) => {
    const t = await submitted(s, await send(env, s, 0, body));
    return BigInt(t.attempts![0]!.gas);
  };

  describe('on a chain that charges a transfer its intrinsic gas (anvil)', () => {
    let env: ChainEnv;
    let watched: FaultProxy;
    before(async () => {
      env = await startChainEnv({
        chain: { confirmations: 1 },
        rpcUrls: async (anvil) => {
          watched = await startFaultProxy(anvil.url);
          return [watched.url];
        },
      });
      await env.anvil.rpc('anvil_setCode', [CAROL, '0x6001600055']);
    });
    after(async () => {
      await env.close();
      await watched.stop();
    });

    it("takes 21,000 without an estimate once the node's estimate said so; a transfer to code and a call are estimated; a value above the balance fails without a nonce", async () => {
      const s = await sendingProject(env);
      const estimates: string[] = [];
      watched.setAnswers((method, result) => {
        if (method === 'eth_estimateGas') estimates.push(String(result));
        return result;
      });
      expect(await gasOfSend(env, s, {}), "the first is estimated: the node's 21,000 and the margin").to.equal(25_200n);
      const asked = estimates.length;
      expect(await gasOfSend(env, s, { value: '2' }), 'then exactly the intrinsic gas').to.equal(21_000n);
      expect(await gasOfSend(env, s, { value: '3' })).to.equal(21_000n);
      expect(estimates.length, 'and the node estimated neither').to.equal(asked);

      const toCode = await gasOfSend(env, s, { to: CAROL, value: '4' });
      expect(toCode > 25_200n, `a transfer to code is estimated (${toCode})`).to.equal(true);
      const call = await gasOfSend(env, s, { data: '0xabcdef01', value: '5' });
      expect(call, 'a call (data) is estimated, with the margin').to.equal((BigInt(estimates[estimates.length - 1]!) * 120n) / 100n);
      expect(estimates.length).to.equal(asked + 2);

      const tooMuch = await send(env, s, 0, { value: String(10n ** 21n) });
      const failed = await until('failed', async () => {
        const t = await get(s, tooMuch.id);
        return t.status === 'failed' ? t : undefined;
      });
      expect(failed.error?.code).to.equal('estimate_failed');
      expect(failed.nonce).to.equal(null);
      const next = await submitted(s, await send(env, s, 0, { value: '6' }));
      expect(next.nonce, 'the nonces stay contiguous').to.equal('5');
      const all = await allIn(s, [next.id], ['confirmed'], 'confirmed');
      expect(await env.anvil.rpc<{ status: string }>('eth_getTransactionReceipt', [all[0]!.hash])).to.include({ status: '0x1' });
    });
  });

  describe('on a chain whose node estimates a transfer above its intrinsic gas (as Arbitrum folds in its L1 cost)', () => {
    let env: ChainEnv;
    let node: FaultProxy;
    before(async () => {
      env = await startChainEnv({
        chain: { confirmations: 1 },
        rpcUrls: async (anvil) => {
          node = await startFaultProxy(anvil.url);
          node.setAnswers((method, result) =>
            method === 'eth_estimateGas' && typeof result === 'string' ? `0x${(BigInt(result) + 4_000n).toString(16)}` : result,
          );
          return [node.url];
        },
      });
    });
    after(async () => {
      await env.close();
      await node.stop();
    });

    it('estimates every send', async () => {
      const s = await sendingProject(env);
      for (let i = 1; i <= 3; i++) expect(await gasOfSend(env, s, { value: String(i) })).to.equal(30_000n);
    });

    it('signs a cancel with the estimate of its no-op, not 21,000 (which such a chain refuses)', async () => {
      const s = await sendingProject(env);
      await env.anvil.rpc('evm_setAutomine', [false]);
      try {
        const t = await submitted(s, await send(env, s, 0, { value: '8' }));
        const cancel = await s.signer.post(`/api/v1/project/${s.projectId}/transactions/${t.id}/cancel`, {});
        expect(cancel.status, cancel.text).to.equal(200);
        const attempts = await until('the cancel signed', async () => {
          const x = await get(s, t.id);
          return x.attempts?.some((a) => a.purpose === 'cancel') ? x.attempts : undefined;
        });
        expect(attempts.map((a) => [a.purpose, BigInt(a.gas)])).to.deep.equal([
          ['send', 30_000n],
          ['cancel', 30_000n],
        ]);
      } finally {
        await env.anvil.rpc('evm_setAutomine', [true]);
      }
    });

    it('fills a gap with a no-op send of its own, policy-checked and at the estimate of its gas; the send behind it is then mined', async () => {
      const s = await sendingProject(env);
      await env.anvil.rpc('evm_setAutomine', [false]);
      let first: Tx;
      let second: Tx;
      try {
        first = await submitted(s, await send(env, s, 0, { value: '9' }));
        second = await submitted(s, await send(env, s, 0, { value: '10' }));
        expect([first.nonce, second.nonce]).to.deep.equal(['0', '1']);
        // The first failed (as a send the node refused after the next left) and is gone from the node: its nonce is a gap.
        // Failed first, a version later (a pass that read it before changes nothing), then dropped once
        // the passes under way are over (one would have sent its bytes again).
        await env.app
          .db('transactions')
          .where({ id: first.id })
          .update({ status: 'failed', error: { code: 'rejected', message: 'refused by the node' }, sequence: env.app.db.raw('sequence + 1') });
        await settlingPasses(env, 2);
        await env.anvil.rpc('anvil_dropTransaction', [first.hash]);
      } finally {
        await env.anvil.rpc('evm_setAutomine', [true]);
      }
      const fill = await until('the gap filled', async () => {
        const r = await s.signer.get(`/api/v1/project/${s.projectId}/transactions?walletId=${s.wallets[0]!.id}`);
        const found = (r.body as { transactions: Array<Tx & { kind: string }> }).transactions.find((t) => t.kind === 'gapFill');
        return found && found.status === 'confirmed' ? get(s, found.id) : undefined;
      });
      expect(fill.nonce).to.equal('0');
      expect(fill.attempts?.map((a) => [a.purpose, BigInt(a.gas)])).to.deep.equal([['gapFill', 30_000n]]);
      const onChain = await env.anvil.rpc<{ from: string; to: string; value: string }>('eth_getTransactionByHash', [fill.hash]);
      expect([onChain.to, BigInt(onChain.value)]).to.deep.equal([s.wallets[0]!.address.toLowerCase(), 0n]);
      await allIn(s, [second.id], ['confirmed'], 'the send behind the gap confirmed');
      expect(await auditOf(env, s, fill.id), 'audited as any send').to.include.members(['queued', 'signed', 'submitted', 'confirmed']);
    });

    it('takes an estimate that is no quantity for a fault of the URL: the send waits and goes when the node answers again', async () => {
      const s = await sendingProject(env);
      let junk = 0;
      node.setAnswers((method, result) => {
        if (method !== 'eth_estimateGas') return result;
        if (junk++ < 2) return null;
        return typeof result === 'string' ? `0x${(BigInt(result) + 4_000n).toString(16)}` : result;
      });
      expect(await gasOfSend(env, s, { value: '7' })).to.equal(30_000n);
      expect(junk, 'the junk answers were given').to.be.greaterThan(2);
    });
  });
});
