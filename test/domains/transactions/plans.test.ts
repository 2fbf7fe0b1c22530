import { expect } from 'chai';
import type { Knex } from 'knex';
import pg from 'pg';
import { migrateLatest } from '../../../src/platform/db/migrate.js';
import { freshenStatistics } from '../../../src/platform/db/statistics.js';
import { accept, acceptMany, changeMany, TransactionEngine, type EngineDeps } from '../../../src/domains/transactions/engine.js';
import { Chains } from '../../../src/domains/transactions/chains.js';
import { createLogger } from '../../../src/platform/logging/logger.js';
import { sink } from '../../support/log.js';
import { isRowFault } from '../../../src/platform/db/pg-errors.js';
import {
  attemptsOf,
  attemptsOfMany,
  claimQueue,
  createQueue,
  prepareAttempts,
  queuedOf,
  releaseQueue,
  reloadTransaction,
  unsettled,
  updateTransaction,
  type TransactionRow,
} from '../../../src/domains/transactions/repository.js';
import { ownDatabase } from '../../support/db.js';

type Captured = { name: string; text: string; values: unknown[] };
type PlanNode = { 'Node Type': string; 'Relation Name'?: string; Plans?: PlanNode[] };

/** A value as an SQL literal, for EXECUTE (a utility statement takes no bound parameters). */
function literal(client: pg.Client, v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'number' || typeof v === 'bigint') return String(v);
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (v instanceof Date) return client.escapeLiteral(v.toISOString());
  if (Buffer.isBuffer(v)) return client.escapeLiteral(`\\x${v.toString('hex')}`);
  if (Array.isArray(v))
    return client.escapeLiteral(`{${v.map((i: unknown) => (i === null ? 'NULL' : JSON.stringify(typeof i === 'string' ? i : Number(i)))).join(',')}}`);
  if (typeof v === 'object') return client.escapeLiteral(JSON.stringify(v));
  return client.escapeLiteral(typeof v === 'string' ? v : JSON.stringify(v));
}

const scansOf = (node: PlanNode): PlanNode[] => [...(node['Node Type'] === 'Seq Scan' ? [node] : []), ...(node.Plans ?? []).flatMap(scansOf)];

/**
 * The send path's prepared statements (hotQuery) keep their generic plans until their tables are
 * analyzed again: planned while `transactions` held a few hundred rows (a new deployment, a
 * benchmark's warm-up), they read the whole table for every key once it has grown, until
 * autovacuum comes round (at most once a minute; never where it is off). The worker's statistics
 * pass analyzes tables that doubled, and the plans are made again.
 */
describe('transactions: the send path looks its rows up by key once its young tables have grown (the statistics pass)', function () {
  this.timeout(60_000);
  let own: Awaited<ReturnType<typeof ownDatabase>>;
  const CHAIN = 31_337;
  const FROM = '0x00000000000000000000000000000000000000aa';
  let base: TransactionRow;
  /** Inserts `n` transactions (most of them settled, as a run leaves them) with an attempt each. */
  let grow: (n: number) => Promise<void>;

  before(async () => {
    own = await ownDatabase(`custody_plans_${process.pid}_${Date.now()}`);
    const db = own.db;
    await migrateLatest(db);
    const [org] = await db('organisations').insert({ name: 'plans' }).returning<Array<{ id: number }>>('id');
    const [project] = await db('projects')
      .insert({ organisation_id: org!.id, name: 'plans', environment: 'testnet', issuer: 'https://plans.example', wallet_webhook_secret_enc: 'unused' })
      .returning<Array<{ id: number }>>('id');
    const [wallet] = await db('wallets')
      .insert({ project_id: project!.id, email: 'plans@example.com', email_lower: 'plans@example.com' })
      .returning<Array<{ id: number }>>('id');
    const row = (i: number, status: string) => ({
      organisation_id: org!.id,
      project_id: project!.id,
      wallet_id: wallet!.id,
      chain_id: CHAIN,
      from_address: `0x${(i % 20).toString(16).padStart(40, '0')}`,
      to_address: FROM,
      value: '1',
      data: Buffer.alloc(0),
      kind: 'send',
      caller: 'server',
      actor: 'plans',
      status,
      nonce: String(i),
      expires_at: new Date(Date.now() + 3_600_000),
    });
    const statuses = ['confirmed', 'confirmed', 'confirmed', 'submitted', 'mined', 'signed', 'queued'];
    grow = async (n) => {
      const ids = await db('transactions')
        .insert(Array.from({ length: n }, (_, i) => row(i, statuses[i % statuses.length]!)))
        .returning<Array<{ id: number }>>('id');
      await db('transaction_attempts').insert(
        ids.map(({ id }, i) => ({
          transaction_id: id,
          purpose: 'send',
          nonce: String(i),
          gas: '21000',
          max_fee_per_gas: '1',
          max_priority_fee_per_gas: '1',
          status: 'broadcast',
          hash: `0x${id.toString(16).padStart(64, '0')}`,
        })),
      );
    };
    // What a benchmark's warm-up leaves (200 sends), analyzed.
    // Autovacuum has not come round yet (it looks once a minute; where it is on, it could analyze the grown tables mid-test).
    await db.raw('ALTER TABLE transactions SET (autovacuum_enabled = false); ALTER TABLE transaction_attempts SET (autovacuum_enabled = false)');
    await grow(200);
    await db.raw('ANALYZE');
    const first = await db('transactions').orderBy('id').first<TransactionRow>();
    base = { ...first, nonce: null, status: 'queued', sequence: 1, events: ['wallet.transaction.queued'] };
  });
  after(async () => {
    await own?.drop();
  });

  it("the accept, the nonce reservation, the status changes and the reads: plans made on the warm-up's tables scan them whole once they grew, until the pass analyzes them", async () => {
    const captured = new Map<string, Captured>();
    // The statements the send path runs, as a request and the passes run them (in a transaction rolled back).
    await own.db
      .transaction(async (tx: Knex.Transaction) => {
        const client = await (tx.client as unknown as { acquireConnection(): Promise<pg.Client> }).acquireConnection();
        const query = client.query.bind(client) as (...args: unknown[]) => unknown;
        (client as unknown as { query: (...args: unknown[]) => unknown }).query = (config: unknown, ...rest: unknown[]) => {
          const c = config as { name?: string; text?: string; values?: unknown[] } | null;
          if (typeof c === 'object' && c !== null && c.name && c.text) captured.set(c.name, { name: c.name, text: c.text, values: c.values ?? [] });
          return query(config, ...rest);
        };
        try {
          const { id: _id, nonce: _nonce, ...fields } = base;
          void [_id, _nonce];
          const accepted = await accept(tx, { ...fields, request_key: 'plans-1' }, new Date(), null);
          await createQueue(tx, CHAIN, FROM, 0n);
          await claimQueue(tx, CHAIN, FROM, 'plans', 30_000);
          await queuedOf(tx, CHAIN, FROM, 25);
          const [attempt] = (await prepareAttempts(tx, { chainId: CHAIN, address: FROM, owner: 'plans', leaseMs: 30_000 }, [
            { transaction_id: accepted.id, purpose: 'send', gas: '21000', max_fee_per_gas: '2', max_priority_fee_per_gas: '1' },
          ]))!;
          const at = new Date();
          const hash = `0x${'ab'.repeat(32)}`;
          const [signed] = await changeMany(
            tx,
            [{ row: { ...accepted, nonce: attempt!.nonce }, patch: { status: 'signed', hash }, event: 'wallet.transaction.signed' }],
            at,
            null,
            [{ id: attempt!.id, status: 'signed', hash, raw: Buffer.from('02', 'hex'), signature_id: null }],
          );
          await changeMany(tx, [{ row: signed!, patch: { status: 'submitted', submitted_at: at }, event: 'wallet.transaction.submitted' }], at, null, [
            { id: attempt!.id, status: 'broadcast', broadcast_at: at },
          ]);
          await releaseQueue(tx, CHAIN, FROM, 'plans');
          await reloadTransaction(tx, accepted.id);
          await attemptsOf(tx, accepted.id);
          await attemptsOfMany(tx, [accepted.id, accepted.id - 1]);
          await unsettled(tx, CHAIN, {}, 2_000);
        } finally {
          (client as unknown as { query: unknown }).query = query;
        }
        throw new Error('rolled back');
      })
      .catch((err: unknown) => {
        if (!(err instanceof Error) || err.message !== 'rolled back') throw err;
      });
    expect([...captured.keys()]).to.include.members([
      'custody_transaction_accept',
      'custody_attempts_prepare',
      'custody_transaction_changes',
      'custody_queued_of',
      'custody_unsettled',
      'custody_transaction_reload',
      'custody_attempts_of_many',
    ]);

    // One connection keeps each statement's generic plan, as a pool's connection does.
    const session = new pg.Client({ connectionString: own.url });
    await session.connect();
    try {
      await session.query('SET plan_cache_mode = force_generic_plan');
      const statements = [...captured.values()];
      for (const [i, c] of statements.entries()) await session.query(`PREPARE plan_check_${i} AS ${c.text}`);
      /** The statements' sequential scans of the send path's tables, in the plans the session holds now. */
      const scans = async (): Promise<string[]> => {
        const found: string[] = [];
        for (const [i, c] of statements.entries()) {
          const args = c.values.length === 0 ? '' : `(${c.values.map((v) => literal(session, v)).join(', ')})`;
          const { rows } = await session.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) EXECUTE plan_check_${i}${args}`);
          for (const scan of scansOf(rows[0]!['QUERY PLAN'][0]!.Plan))
            if (scan['Relation Name'] === 'transactions' || scan['Relation Name'] === 'transaction_attempts') found.push(`${c.name}: ${scan['Relation Name']}`);
        }
        return found.sort();
      };
      const young = await scans();
      expect(young, 'plans made on 200 rows read some table whole').to.not.deep.equal([]);

      // The tables grow sixteenfold; nothing analyzes them: the plans stay.
      await grow(3_000);
      for (let i = 0; ; i++) {
        const { rows } = await session.query<{ n: string }>(
          `SELECT min(n_live_tup) AS n FROM pg_stat_user_tables WHERE relname IN ('transactions', 'transaction_attempts')`,
        );
        if (Number(rows[0]?.n) >= 3_200) break;
        if (i > 300) throw new Error('the table statistics never counted the rows');
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(await scans(), 'plans kept after the growth').to.deep.equal(young);

      // The pass analyzes what doubled; the plans are made again and look rows up by key.
      expect(await freshenStatistics(own.db)).to.include.members(['transaction_attempts', 'transactions']);
      expect(await scans()).to.deep.equal([]);
      // Nothing doubled since: nothing to analyze.
      expect(await freshenStatistics(own.db)).to.deep.equal([]);
    } finally {
      await session.end();
    }
  });
  it('a status change answers the row with the request flags as stored (a cancel asked meanwhile sets them without a status change)', async () => {
    await own.db
      .transaction(async (tx: Knex.Transaction) => {
        const { id: _id, nonce: _nonce, ...fields } = base;
        void [_id, _nonce];
        const accepted = await accept(tx, { ...fields, request_key: 'plans-flags' }, new Date(), null);
        // The row as the sending request holds it; a cancel request arrives before its broadcast is written.
        await updateTransaction(tx, accepted.id, { cancel_requested: true });
        const [signed] = await changeMany(
          tx,
          [{ row: accepted, patch: { status: 'signed', hash: `0x${'cd'.repeat(32)}` }, event: 'wallet.transaction.signed' }],
          new Date(),
        );
        expect(signed).to.include({ status: 'signed', cancel_requested: true, speed_up_requested: false });
        expect(await reloadTransaction(tx, accepted.id)).to.include({ status: 'signed', cancel_requested: true });
        throw new Error('rolled back');
      })
      .catch((err: unknown) => {
        if (!(err instanceof Error) || err.message !== 'rolled back') throw err;
      });
  });
  it("sends accepted together are one statement: ids in their order, each its own row, time, audit entry and request; a repeated request key is answered the first one's row; a row that breaks a constraint fails it as a row fault", async () => {
    await own.db
      .transaction(async (tx: Knex.Transaction) => {
        const { id: _id, nonce: _nonce, ...fields } = base;
        void [_id, _nonce];
        const at = new Date('2026-11-27T10:00:00.000Z');
        const later = (ms: number) => new Date(at.getTime() + ms);
        const sends = [
          { send: { ...fields, request_key: 'together-1', value: '7', data: Buffer.from('c0ffee', 'hex') }, at, requestId: 'request-a' },
          { send: { ...fields, request_key: 'together-1', value: '8' }, at: later(1), requestId: 'request-b' },
          { send: { ...fields, request_key: null, value: '9', nonce: '42' }, at: later(2), requestId: 'request-c' },
        ];
        // A send accepted before, whose key comes again in the group beside one repeated within it.
        const [earlier] = (await acceptMany(tx, [
          { send: { ...fields, request_key: 'together-0', value: '6' }, at, requestId: 'request-0' },
        ])) as TransactionRow[];
        const answers = await acceptMany(tx, [...sends, { send: { ...fields, request_key: 'together-0', value: '5' }, at, requestId: 'request-d' }]);
        expect(answers.filter((r) => r instanceof Error)).to.deep.equal([]);
        const [a, b, c, d] = answers as TransactionRow[];
        expect(d).to.deep.equal(earlier);
        expect(b!.id).to.equal(a!.id);
        expect(c!.id).to.be.greaterThan(a!.id);
        expect(a).to.include({ value: '7', status: 'queued', request_key: 'together-1', nonce: null, sequence: 1 });
        expect(a!.data.toString('hex')).to.equal('c0ffee');
        expect(a!.created_at.toISOString()).to.equal(at.toISOString());
        expect(c).to.include({ value: '9', nonce: '42', request_key: null });
        expect(c!.created_at.toISOString()).to.equal(later(2).toISOString());
        expect(await reloadTransaction(tx, c!.id)).to.deep.include({ value: '9', nonce: '42', events: ['wallet.transaction.queued'] });
        const audits = await tx('audit_log')
          .whereIn('target', [`transaction:${a!.id}`, `transaction:${c!.id}`])
          .orderBy('id')
          .select<Array<{ target: string; request_id: string; action: string }>>('target', 'request_id', 'action');
        expect(audits).to.deep.equal([
          { target: `transaction:${a!.id}`, request_id: 'request-a', action: 'wallet.transaction.queued' },
          { target: `transaction:${c!.id}`, request_id: 'request-c', action: 'wallet.transaction.queued' },
        ]);
        // A wallet that does not exist: the statement fails as a row's fault (the engine's group then writes each row alone).
        const failed = await tx
          .transaction((savepoint) => acceptMany(savepoint, [{ ...sends[2]! }, { send: { ...fields, request_key: null, wallet_id: 0 }, at, requestId: null }]))
          .then(
            () => undefined,
            (err: unknown) => err,
          );
        expect(isRowFault(failed)).to.equal(true);
        throw new Error('rolled back');
      })
      .catch((err: unknown) => {
        if (!(err instanceof Error) || err.message !== 'rolled back') throw err;
      });
  });
  it("lets two requests wait for one send's broadcast (the same Idempotency-Key run again): each forgets its own wait only", async () => {
    const log = createLogger('info', sink().stream);
    const now = () => Date.now();
    // Only the answers are used here: nothing is signed or sent.
    const engine = new TransactionEngine({
      db: own.db,
      now,
      log,
      chains: new Chains([], log, now),
      leaseMs: 30_000,
      settleWindow: 10,
    } as unknown as EngineDeps);
    const first = engine.awaitAnswer(7);
    const second = engine.awaitAnswer(7);
    const settled: string[] = [];
    void first.answer.then(() => settled.push('first'));
    void second.answer.then(() => settled.push('second'));
    second.forget();
    expect(await second.answer).to.equal(undefined);
    await new Promise((r) => setImmediate(r));
    expect(settled).to.deep.equal(['second']);
    first.forget();
    expect(await first.answer).to.equal(undefined);
    // Nothing waits any more: a turn in progress is none either.
    await engine.drain(10);
  });
});
