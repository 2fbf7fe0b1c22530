import { expect } from 'chai';
import { Transaction } from 'ethers';
import { sendingProject, startChainEnv, type ChainEnv } from '../../support/chain.js';
import { until } from '../../support/wait.js';

const BOB = '0x0000000000000000000000000000000000000B0b';

interface Tx {
  id: number;
  status: string;
  nonce: string | null;
  hash: string | null;
  waiting: string | null;
  error: { code: string; message: string } | null;
  attempts?: Array<{ hash: string; purpose: string }>;
}

/** Sending from a wallet (docs/transactions.md), against a real node. */
describe('transactions: a wallet sends, and the service follows the transaction to its depth', function () {
  this.timeout(120_000);
  let env: ChainEnv;
  before(async () => {
    env = await startChainEnv({ env: { WEBHOOK_RETRY_SCHEDULE: '0,300,300' } });
  });
  after(() => env.close());

  const get = async (s: Awaited<ReturnType<typeof sendingProject>>, id: number): Promise<Tx> => {
    const r = await s.signer.get(`/api/v1/project/${s.projectId}/transactions/${id}`);
    expect(r.status, r.text).to.equal(200);
    return r.body as Tx;
  };
  const mine = (blocks: number) => env.anvil.rpc('anvil_mine', [`0x${blocks.toString(16)}`]);

  it('sends: nonce, gas and fees filled, signed under the policy, broadcast, mined, confirmed at depth, each change an ordered event and an audit entry', async () => {
    const s = await sendingProject(env);
    const w = s.wallets[0]!;
    const hook = await s.admin.post(`/api/v1/project/${s.projectId}/webhooks`, {
      url: `${env.receiver.url}?p=${s.projectId}`,
      events: [
        'wallet.transaction.queued',
        'wallet.transaction.signed',
        'wallet.transaction.submitted',
        'wallet.transaction.mined',
        'wallet.transaction.confirmed',
      ],
    });
    expect(hook.status, hook.text).to.equal(201);
    const sent = await s.signer.post(
      `/api/v1/project/${s.projectId}/wallets/${w.id}/transactions`,
      { chainId: env.anvil.chainId, to: BOB, value: '1000' },
      { headers: { 'idempotency-key': 'send-1' } },
    );
    expect(sent.status, sent.text).to.equal(202);
    // Submitted by this request, or (when the worker held the wallet's queue at that moment) by the worker just after;
    // anvil mines it at once, and a settling pass may find its receipt before the answer is read. Not confirmed: that takes a second block.
    expect((sent.body as Tx).status).to.be.oneOf(['queued', 'signed', 'submitted', 'mined']);
    const tx = await until('submitted', async () => {
      const t = await get(s, (sent.body as Tx).id);
      return t.hash !== null && t.status !== 'queued' && t.status !== 'signed' ? t : undefined;
    });
    expect(tx.nonce).to.equal('0');
    // The answer is the row as stored: a `submitted` one is the row its broadcast wrote (not read again), field for field.
    const answered = sent.body as Record<string, unknown>;
    const stored = tx as unknown as Record<string, unknown>;
    expect(Object.keys(answered).sort()).to.deep.equal(
      Object.keys(stored)
        // Only GET of one transaction lists its attempts and events.
        .filter((k) => k !== 'attempts' && k !== 'events')
        .sort(),
    );
    const settledFields = ['status', 'blockNumber', 'blockHash', 'receipt', 'updatedAt'];
    const same =
      answered['status'] === 'submitted'
        ? Object.keys(answered).filter((k) => !settledFields.includes(k))
        : ['id', 'from', 'to', 'value', 'data', 'createdAt', 'expiresAt'];
    for (const k of same) expect(answered[k], k).to.deep.equal(stored[k]);
    const onChain = await env.anvil.rpc<{ from: string; nonce: string; to: string; value: string; raw?: string } | null>('eth_getTransactionByHash', [tx.hash]);
    expect(onChain?.from.toLowerCase()).to.equal(w.address.toLowerCase());
    expect(BigInt(onChain?.value ?? 0)).to.equal(1000n);

    // The same key answers the same transaction: one on the chain.
    const again = await s.signer.post(
      `/api/v1/project/${s.projectId}/wallets/${w.id}/transactions`,
      { chainId: env.anvil.chainId, to: BOB, value: '1000' },
      { headers: { 'idempotency-key': 'send-1' } },
    );
    expect(again.status).to.equal(202);
    expect((again.body as Tx).id).to.equal(tx.id);
    expect(BigInt(await env.anvil.rpc<string>('eth_getTransactionCount', [w.address, 'latest']))).to.equal(1n);

    await until('mined', async () => ((await get(s, tx.id)).status === 'mined' ? true : undefined));
    await mine(2);
    const confirmed = await until('confirmed', async () => {
      const t = await get(s, tx.id);
      return t.status === 'confirmed' ? t : undefined;
    });
    expect(confirmed.attempts?.map((a) => a.purpose)).to.deep.equal(['send']);
    // Its events so far, numbered as their deliveries are.
    expect((confirmed as unknown as { events: Array<{ sequence: number; type: string }> }).events).to.deep.equal(
      ['queued', 'signed', 'submitted', 'mined', 'confirmed'].map((s, i) => ({ sequence: i + 1, type: `wallet.transaction.${s}` })),
    );

    const events = await until('the five events', () => {
      const mineOnly = env.receiver.received
        .filter((r) => r.body.includes(`"projectId":${s.projectId}`))
        .map((r) => JSON.parse(r.body) as { type: string; data: { id: number; sequence: number } });
      return mineOnly.length >= 5 ? mineOnly : undefined;
    });
    expect(events.map((e) => `${e.data.sequence} ${e.type}`)).to.deep.equal([
      '1 wallet.transaction.queued',
      '2 wallet.transaction.signed',
      '3 wallet.transaction.submitted',
      '4 wallet.transaction.mined',
      '5 wallet.transaction.confirmed',
    ]);
    const audit = await env.app.client.get(`/api/v1/organisations/${s.organisationId}/audit`);
    const actions = (audit.body.entries as Array<{ action: string; target: string }>).filter((e) => e.target === `transaction:${tx.id}`).map((e) => e.action);
    expect(actions.sort()).to.deep.equal(
      [
        'wallet.transaction.queued',
        'wallet.transaction.signed',
        'wallet.transaction.submitted',
        'wallet.transaction.mined',
        'wallet.transaction.confirmed',
      ].sort(),
    );
  });

  it("delivers a transaction's events to each subscription in their order, even when one of them has to be retried", async () => {
    const s = await sendingProject(env);
    const w = s.wallets[0]!;
    const hook = await s.admin.post(`/api/v1/project/${s.projectId}/webhooks`, { url: `${env.receiver.url}?order=${s.projectId}`, events: ['*'] });
    expect(hook.status, hook.text).to.equal(201);
    const mineOf = (r: { body: string }) => r.body.includes(`"projectId":${s.projectId}`) && r.body.includes('"wallet.transaction.');
    let refused = 0;
    // The first attempt of the first event fails: the ones after it wait for its retry.
    env.receiver.respond = (r) => (mineOf(r) && r.body.includes('"sequence":1,') && refused++ === 0 ? { status: 500 } : { status: 204 });
    try {
      const sent = await s.signer.post(`/api/v1/project/${s.projectId}/wallets/${w.id}/transactions`, { chainId: env.anvil.chainId, to: BOB, value: '1' });
      expect(sent.status, sent.text).to.equal(202);
      // Blocks mined before the worker broadcasts (it may hold the wallet's queue when the send is answered) would not count toward its depth.
      await until('mined', async () => ((await get(s, (sent.body as Tx).id)).status === 'mined' ? true : undefined));
      await mine(2);
      const seen = await until('the five events delivered', () => {
        const got = env.receiver.received.filter(mineOf).map((r) => JSON.parse(r.body) as { type: string; data: { sequence: number } });
        return got.filter((e) => e.data.sequence > 0).length >= 6 ? got : undefined;
      });
      // Every attempt in order: 1 (refused), 1 (retried), then 2, 3, 4, 5 — never a later one before an earlier one was delivered.
      expect(seen.map((e) => e.data.sequence)).to.deep.equal([1, 1, 2, 3, 4, 5]);
      expect(refused).to.equal(2);
    } finally {
      env.receiver.respond = undefined;
    }
  });

  it('refuses what it cannot send with a 400 and records nothing; a policy denial fails the send without taking its nonce', async () => {
    const s = await sendingProject(env, 1, {
      rules: [{ name: 'small', action: 'allow', method: 'eth_sendTransaction', conditions: [{ field: 'value', op: 'lte', value: '5000' }] }],
    });
    const w = s.wallets[0]!;
    const path = `/api/v1/project/${s.projectId}/wallets/${w.id}/transactions`;
    const unknown = await s.signer.post(path, { chainId: 1, to: BOB });
    expect(unknown.status).to.equal(400);
    expect(unknown.problem.code).to.equal('unknown_chain');
    const capped = await s.signer.post(path, { chainId: env.anvil.chainId, to: BOB, maxFeePerGas: String(10n ** 12n), maxPriorityFeePerGas: '1' });
    expect(capped.status).to.equal(400);
    expect(capped.problem.code).to.equal('fee_above_cap');
    const badTo = await s.signer.post(path, { chainId: env.anvil.chainId, to: '0x0000000000000000000000000000000000000b0B' });
    expect(badTo.status).to.equal(400);
    const admin = await s.admin.post(path, { chainId: env.anvil.chainId, to: BOB });
    expect(admin.status, 'admin does not imply signer').to.equal(403);
    const list = await s.signer.get(`/api/v1/project/${s.projectId}/transactions`);
    expect((list.body as { transactions: unknown[] }).transactions).to.have.length(0);

    const refusedSend = await s.signer.post(path, { chainId: env.anvil.chainId, to: BOB, value: '9000' });
    expect(refusedSend.status).to.equal(202);
    const denied = await until('refused', async () => {
      const t = await get(s, (refusedSend.body as Tx).id);
      return t.status !== 'queued' ? t : undefined;
    });
    expect(denied.status).to.equal('failed');
    expect(denied.error?.code).to.equal('policy_denied');
    const ok = await s.signer.post(path, { chainId: env.anvil.chainId, to: BOB, value: '10' });
    expect(ok.status, ok.text).to.equal(202);
    const sentOk = await until('signed', async () => {
      const t = await get(s, (ok.body as Tx).id);
      return t.nonce !== null && t.status !== 'queued' ? t : undefined;
    });
    expect(sentOk.nonce, 'the denied send gave its nonce back').to.equal('0');
  });

  it('eth_sendTransaction on both rpc endpoints answers the hash of the transaction sent', async () => {
    const s = await sendingProject(env);
    const w = s.wallets[0]!;
    const backend = await s.signer.post(`/api/v1/project/${s.projectId}/wallets/${w.id}/rpc`, {
      method: 'eth_sendTransaction',
      params: { transaction: { chainId: `0x${env.anvil.chainId.toString(16)}`, from: w.address, to: BOB, value: '0x10' } },
    });
    expect(backend.status, backend.text).to.equal(200);
    const hash = (backend.body as { hash: string }).hash;
    const raw = await env.anvil.rpc<string>('eth_getRawTransactionByHash', [hash]);
    expect(Transaction.from(raw).from).to.equal(w.address);

    const user = await env.app.client.post(
      '/api/v1/wallets/rpc',
      { key: s.projectKey, method: 'eth_sendTransaction', params: { transaction: { chainId: env.anvil.chainId, to: BOB, value: '0x20' } } },
      { token: await s.userJwt('user0@example.com') },
    );
    expect(user.status, user.text).to.equal(200);
    const second = await env.anvil.rpc<{ nonce: string }>('eth_getTransactionByHash', [(user.body as { hash: string }).hash]);
    expect(BigInt(second.nonce)).to.equal(1n);
    const withNonce = await s.signer.post(`/api/v1/project/${s.projectId}/wallets/${w.id}/rpc`, {
      method: 'eth_sendTransaction',
      params: { transaction: { chainId: env.anvil.chainId, to: BOB, nonce: '0x5' } },
    });
    expect(withNonce.status, 'the service chooses nonces').to.equal(400);
  });
});

describe("transactions: a send's events wake the outbox relays", function () {
  this.timeout(60_000);
  let env: ChainEnv;
  // The relays poll once a minute here: only the statements that write the events, waking them, deliver the events within the test.
  before(async () => {
    env = await startChainEnv({ env: { RELAY_POLL_MS: '60000' } });
  });
  after(() => env.close());

  it('delivers each event of a send at once, not at the next poll', async () => {
    const s = await sendingProject(env);
    const hook = await s.admin.post(`/api/v1/project/${s.projectId}/webhooks`, { url: `${env.receiver.url}?wake=${s.projectId}`, events: ['*'] });
    expect(hook.status, hook.text).to.equal(201);
    const sent = await s.signer.post(`/api/v1/project/${s.projectId}/wallets/${s.wallets[0]!.id}/transactions`, {
      chainId: env.anvil.chainId,
      to: BOB,
      value: '1',
    });
    expect(sent.status, sent.text).to.equal(202);
    const id = (sent.body as Tx).id;
    await until('mined', async () => {
      const r = await s.signer.get(`/api/v1/project/${s.projectId}/transactions/${id}`);
      return (r.body as Tx).status === 'mined' ? true : undefined;
    });
    await env.anvil.rpc('anvil_mine', ['0x2']);
    const types = await until(
      'the five events delivered',
      () => {
        const got = env.receiver.received
          .filter((r) => r.body.includes(`"projectId":${s.projectId}`) && r.body.includes('"wallet.transaction.'))
          .map((r) => (JSON.parse(r.body) as { type: string }).type);
        return got.length >= 5 ? got : undefined;
      },
      20_000,
    );
    expect(types).to.deep.equal([
      'wallet.transaction.queued',
      'wallet.transaction.signed',
      'wallet.transaction.submitted',
      'wallet.transaction.mined',
      'wallet.transaction.confirmed',
    ]);
  });
});

describe('transactions: an event waiting for an earlier one of its stream', function () {
  this.timeout(60_000);
  let env: ChainEnv;
  // The relays poll once a minute; one confirmation, so a transaction's mined and confirmed events are written together.
  before(async () => {
    env = await startChainEnv({ chain: { confirmations: 1 }, env: { RELAY_POLL_MS: '60000' } });
  });
  after(() => env.close());

  it('is delivered when its wait is over, not at the next poll', async () => {
    const s = await sendingProject(env, 4);
    const hook = await s.admin.post(`/api/v1/project/${s.projectId}/webhooks`, { url: `${env.receiver.url}?due=${s.projectId}`, events: ['*'] });
    expect(hook.status, hook.text).to.equal(201);
    // Claimed together, a confirmed event finds its mined one still in flight and waits its turn (250 ms).
    const ids = await Promise.all(
      s.wallets.map(async (w) => {
        const sent = await s.signer.post(`/api/v1/project/${s.projectId}/wallets/${w.id}/transactions`, { chainId: env.anvil.chainId, to: BOB, value: '1' });
        expect(sent.status, sent.text).to.equal(202);
        return (sent.body as Tx).id;
      }),
    );
    const got = await until(
      'every event of the four sends delivered',
      () => {
        const events = env.receiver.received
          .filter((r) => r.body.includes(`"projectId":${s.projectId}`) && r.body.includes('"wallet.transaction.'))
          .map((r) => JSON.parse(r.body) as { type: string; data: { id: number; sequence: number } });
        return events.length >= 20 ? events : undefined;
      },
      15_000,
    );
    for (const id of ids)
      expect(
        got.filter((e) => e.data.id === id).map((e) => e.data.sequence),
        `transaction ${id}`,
      ).to.deep.equal([1, 2, 3, 4, 5]);
  });
});

/** docs/decisions.md, "Draining": a send's request answers before its queue's turn ends. */
describe('transactions: a graceful stop', function () {
  this.timeout(120_000);
  it("waits for the queue turns requests started and that go on after their answers: nothing is left queued or signed, and the queue's lease is given back", async () => {
    const env = await startChainEnv();
    try {
      const s = await sendingProject(env);
      const w = s.wallets[0]!;
      const answers = await Promise.all(
        Array.from({ length: 40 }, () =>
          s.signer.post(`/api/v1/project/${s.projectId}/wallets/${w.id}/transactions`, { chainId: env.anvil.chainId, to: BOB, value: '1' }),
        ),
      );
      expect(answers.map((a) => a.status)).to.deep.equal(Array<number>(40).fill(202));
      // The stop, as main.ts makes it once the last request is answered.
      await env.app.close();
      const open = await env.app
        .db('transactions')
        .where({ wallet_id: w.id })
        .whereIn('status', ['queued', 'signed'])
        .count<Array<{ count: string }>>('id as count');
      expect(Number(open[0]?.count)).to.equal(0);
      const queue = await env.app.db('send_queues').where({ address: w.address.toLowerCase() }).first<{ lease_owner: string | null }>('lease_owner');
      expect(queue?.lease_owner).to.equal(null);
    } finally {
      await env.receiver.close();
      await env.idp.close();
      await env.anvil.stop();
    }
  });
});
