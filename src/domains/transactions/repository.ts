import { hotQuery, keyedRows, pgArray, type Executor } from '../../platform/db/knex.js';
import type { KeyRange } from '../../platform/db/rotation.js';
import type { Page } from '../../platform/http/pagination.js';
import type { SendPurpose } from '../../../contract/index.js';

export const STATUSES = ['queued', 'signed', 'submitted', 'mined', 'confirmed', 'failed', 'replaced', 'cancelled', 'expired'] as const;
export type Status = (typeof STATUSES)[number];
/** Where a transaction ends: nothing changes it after. */
export const TERMINAL: readonly Status[] = ['confirmed', 'failed', 'replaced', 'cancelled', 'expired'];

export interface TransactionRow {
  id: number;
  organisation_id: number;
  project_id: number;
  wallet_id: number;
  chain_id: number;
  from_address: string;
  to_address: string | null;
  value: string;
  data: Buffer;
  gas: string | null;
  max_fee_per_gas: string | null;
  max_priority_fee_per_gas: string | null;
  kind: 'send' | 'gapFill';
  caller: 'user' | 'server';
  actor: string;
  status: Status;
  waiting: string | null;
  nonce: string | null;
  hash: string | null;
  sequence: number;
  /** Its events' types so far, in order (`events[k-1]` is the type of event `k`). */
  events: string[];
  block_number: string | null;
  block_hash: string | null;
  receipt: Record<string, unknown> | null;
  error: { code: string; message: string } | null;
  cancel_requested: boolean;
  speed_up_requested: boolean;
  created_at: Date;
  updated_at: Date;
  submitted_at: Date | null;
  expires_at: Date;
  /** The caller and Idempotency-Key of the request that made it. */
  request_key: string | null;
}

export interface AttemptRow {
  id: number;
  transaction_id: number;
  purpose: SendPurpose;
  nonce: string;
  gas: string;
  max_fee_per_gas: string;
  max_priority_fee_per_gas: string;
  replaces: string | null;
  status: 'prepared' | 'signed' | 'broadcast' | 'superseded';
  hash: string | null;
  raw: Buffer | null;
  signature_id: string | null;
  created_at: Date;
  broadcast_at: Date | null;
}

/**
 * The columns a prepared statement reads, named: PostgreSQL fixes a named statement's result
 * columns when it prepares it, so a `*` would fail on every connection that prepared it once a
 * migration adds a column (the previous version keeps running beside a newer schema in an upgrade).
 */
const TRANSACTION_COLUMNS = [
  'id',
  'organisation_id',
  'project_id',
  'wallet_id',
  'chain_id',
  'from_address',
  'to_address',
  'value',
  'data',
  'gas',
  'max_fee_per_gas',
  'max_priority_fee_per_gas',
  'kind',
  'caller',
  'actor',
  'status',
  'waiting',
  'nonce',
  'hash',
  'sequence',
  'events',
  'block_number',
  'block_hash',
  'receipt',
  'error',
  'cancel_requested',
  'speed_up_requested',
  'created_at',
  'updated_at',
  'submitted_at',
  'expires_at',
  'request_key',
] as const satisfies ReadonlyArray<keyof TransactionRow>;
const ATTEMPT_COLUMNS = [
  'id',
  'transaction_id',
  'purpose',
  'nonce',
  'gas',
  'max_fee_per_gas',
  'max_priority_fee_per_gas',
  'replaces',
  'status',
  'hash',
  'raw',
  'signature_id',
  'created_at',
  'broadcast_at',
] as const satisfies ReadonlyArray<keyof AttemptRow>;
// Every field of the row types is read (the compiler says which one is missing).
const allRead: [Exclude<keyof TransactionRow, (typeof TRANSACTION_COLUMNS)[number]>, Exclude<keyof AttemptRow, (typeof ATTEMPT_COLUMNS)[number]>] extends [
  never,
  never,
]
  ? true
  : never = true;
void allRead;
export const T_COLS = TRANSACTION_COLUMNS.join(', ');
const A_COLS = ATTEMPT_COLUMNS.join(', ');

export const numeric = (r: TransactionRow): TransactionRow => ({
  ...r,
  id: Number(r.id),
  organisation_id: Number(r.organisation_id),
  project_id: Number(r.project_id),
  wallet_id: Number(r.wallet_id),
  chain_id: Number(r.chain_id),
});
const numericAttempt = (a: AttemptRow): AttemptRow => ({ ...a, id: Number(a.id), transaction_id: Number(a.transaction_id) });

export type NewTransaction = Pick<
  TransactionRow,
  | 'request_key'
  | 'organisation_id'
  | 'project_id'
  | 'wallet_id'
  | 'chain_id'
  | 'from_address'
  | 'to_address'
  | 'value'
  | 'data'
  | 'gas'
  | 'max_fee_per_gas'
  | 'max_priority_fee_per_gas'
  | 'kind'
  | 'caller'
  | 'actor'
  | 'expires_at'
> & { nonce?: string };

export const INSERT_COLUMNS = [
  'request_key',
  'organisation_id',
  'project_id',
  'wallet_id',
  'chain_id',
  'from_address',
  'to_address',
  'value',
  'data',
  'gas',
  'max_fee_per_gas',
  'max_priority_fee_per_gas',
  'kind',
  'caller',
  'actor',
  'expires_at',
  'nonce',
] as const satisfies ReadonlyArray<keyof NewTransaction>;
/** The ids the next `count` transactions take, in order (their events name them before they are written). */
export async function nextTransactionIds(db: Executor, count: number): Promise<number[]> {
  const rows = await hotQuery<{ id: string }>(
    db,
    'custody_transaction_next_ids',
    `SELECT nextval(pg_get_serial_sequence('transactions', 'id')) AS id FROM generate_series(1, $1) ORDER BY 1`,
    [count],
  );
  return rows.map((r) => Number(r.id));
}

/** How transactionsOfRequests keys what it finds. */
export const requestKeyOf = (projectId: number, requestKey: string): string => `${projectId}\n${requestKey}`;

/** The transactions that sends' request keys made, in one statement (keyed by requestKeyOf). */
export async function transactionsOfRequests(
  db: Executor,
  keys: ReadonlyArray<{ projectId: number; requestKey: string }>,
): Promise<Map<string, TransactionRow>> {
  if (keys.length === 0) return new Map();
  const rows = await hotQuery<TransactionRow>(
    db,
    'custody_transactions_of_requests',
    `SELECT ${T_COLS} FROM transactions WHERE (project_id, request_key) IN (SELECT * FROM unnest($1::bigint[], $2::text[]))`,
    [pgArray(keys.map((k) => k.projectId)), pgArray(keys.map((k) => k.requestKey))],
  );
  return new Map(rows.map((r) => [requestKeyOf(Number(r.project_id), r.request_key!), numeric(r)]));
}

export async function findProjectTransaction(db: Executor, projectId: number, id: number): Promise<TransactionRow | undefined> {
  const row = await db('transactions').where({ id, project_id: projectId }).first<TransactionRow | undefined>();
  return row ? numeric(row) : undefined;
}

export interface TransactionFilter {
  walletId?: number | undefined;
  chainId?: number | undefined;
  status?: Status | undefined;
}

/** A page of the project's transactions, oldest first (cursor: the last id). */
export async function listTransactions(db: Executor, projectId: number, filter: TransactionFilter, page: Page): Promise<TransactionRow[]> {
  const q = db('transactions').where('project_id', projectId).andWhere('id', '>', page.afterId);
  if (filter.walletId !== undefined) q.andWhere('wallet_id', filter.walletId);
  if (filter.chainId !== undefined) q.andWhere('chain_id', filter.chainId);
  if (filter.status !== undefined) q.andWhere('status', filter.status);
  const rows = await q
    .orderBy('id')
    .limit(page.limit + 1)
    .select<TransactionRow[]>('*');
  return rows.map(numeric);
}

/** Changes a transaction's columns (no event). */
export async function updateTransaction(db: Executor, id: number, patch: Partial<TransactionRow>): Promise<void> {
  await db('transactions')
    .where({ id })
    .update({ ...patch, updated_at: db.fn.now() });
}

export async function attemptsOf(db: Executor, transactionId: number): Promise<AttemptRow[]> {
  const rows = await hotQuery<AttemptRow>(db, 'custody_attempts_of', `SELECT ${A_COLS} FROM transaction_attempts WHERE transaction_id = $1 ORDER BY id`, [
    transactionId,
  ]);
  return rows.map(numericAttempt);
}

export async function attemptsOfMany(db: Executor, ids: readonly number[]): Promise<Map<number, AttemptRow[]>> {
  const out = new Map<number, AttemptRow[]>();
  if (ids.length === 0) return out;
  const rows = await hotQuery<AttemptRow>(
    db,
    'custody_attempts_of_many',
    `SELECT ${A_COLS} FROM transaction_attempts WHERE transaction_id = ANY($1::bigint[]) ORDER BY id`,
    [[...ids]],
  );
  for (const r of rows.map(numericAttempt)) {
    const list = out.get(r.transaction_id) ?? [];
    list.push(r);
    out.set(r.transaction_id, list);
  }
  return out;
}

export type NewAttempt = Pick<AttemptRow, 'transaction_id' | 'purpose' | 'nonce' | 'gas' | 'max_fee_per_gas' | 'max_priority_fee_per_gas' | 'replaces'>;

export async function insertAttempt(db: Executor, a: NewAttempt): Promise<AttemptRow> {
  const [row] = await db('transaction_attempts')
    .insert({ ...a, status: 'prepared' })
    .returning<AttemptRow[]>('*');
  if (!row) throw new Error('the attempt was not inserted');
  return numericAttempt(row);
}

/** Sets (or clears) transactions' nonces, waiting for nothing any more. */
export async function setNonces(db: Executor, ids: readonly number[], nonces: ReadonlyArray<bigint | null>): Promise<void> {
  if (ids.length === 0) return;
  await db.raw(
    `UPDATE transactions t SET nonce = v.nonce, waiting = NULL, updated_at = now()
       FROM unnest(?::bigint[], ?::numeric[]) AS v(id, nonce) WHERE t.id = v.id`,
    [[...ids], pgArray(nonces.map((n) => (n === null ? null : n.toString())))],
  );
}

export async function deleteAttempts(db: Executor, ids: readonly number[]): Promise<void> {
  if (ids.length > 0) await db('transaction_attempts').whereIn('id', ids).delete();
}

export async function updateAttempt(db: Executor, id: number, patch: Partial<AttemptRow>): Promise<void> {
  await db('transaction_attempts').where({ id }).update(patch);
}

export async function deleteAttempt(db: Executor, id: number): Promise<void> {
  await db('transaction_attempts').where({ id }).delete();
}

// ---- The send queue of a chain and address: its next nonce and its lease -------------------

/** The queue's next nonce if `owner` holds (or now takes) its lease; undefined when another holds it or it has no row yet. */
export async function claimQueue(db: Executor, chainId: number, address: string, owner: string, leaseMs: number): Promise<bigint | undefined | 'absent'> {
  const rows = await hotQuery<{ next_nonce: string; mine: boolean }>(
    db,
    'custody_queue_claim',
    `WITH claimed AS (
       UPDATE send_queues SET lease_owner = $1, lease_until = now() + make_interval(secs => $2)
        WHERE chain_id = $3 AND address = $4 AND (lease_until IS NULL OR lease_until < now() OR lease_owner = $1)
        RETURNING next_nonce)
     SELECT next_nonce, true AS mine FROM claimed
     UNION ALL SELECT next_nonce, false FROM send_queues WHERE chain_id = $3 AND address = $4 AND NOT EXISTS (SELECT 1 FROM claimed)`,
    [owner, leaseMs / 1000, chainId, address],
  );
  const row = rows[0];
  if (!row) return 'absent';
  return row.mine ? BigInt(row.next_nonce) : undefined;
}

/** A queue's first row, starting at the chain's count of the address's transactions. */
export async function createQueue(db: Executor, chainId: number, address: string, nextNonce: bigint): Promise<void> {
  await db.raw('INSERT INTO send_queues (chain_id, address, next_nonce) VALUES (?, ?, ?) ON CONFLICT DO NOTHING', [chainId, address, nextNonce.toString()]);
}

export async function releaseQueue(db: Executor, chainId: number, address: string, owner: string): Promise<void> {
  await hotQuery(
    db,
    'custody_queue_release',
    'UPDATE send_queues SET lease_owner = NULL, lease_until = NULL WHERE chain_id = $1 AND address = $2 AND lease_owner = $3',
    [chainId, address, owner],
  );
}

/** The most attempts prepareAttempts takes at once (a queue's batch). */
export const ATTEMPTS_PER_STATEMENT = 25;

/**
 * Prepares an attempt for each planned transaction at the queue's next nonces, in one statement:
 * the nonces taken (only while `owner` holds the lease; a lapsed holder takes nothing, and the
 * lease is renewed for the batch: a holder that died frees its queue one lease after its last),
 * written on the transactions and on their attempts. A gap fill comes with its own nonce.
 * Answers the attempts in the plan's order, or undefined when the lease was lost.
 */
export async function prepareAttempts(
  db: Executor,
  queue: { chainId: number; address: string; owner: string; leaseMs: number; nonce?: bigint | undefined },
  plan: ReadonlyArray<Pick<NewAttempt, 'transaction_id' | 'purpose' | 'gas' | 'max_fee_per_gas' | 'max_priority_fee_per_gas'>>,
): Promise<AttemptRow[] | undefined> {
  if (plan.length > ATTEMPTS_PER_STATEMENT) throw new Error(`at most ${ATTEMPTS_PER_STATEMENT} attempts are prepared at once`);
  // The queue's next nonces, taken under its lease; or the one a gap fill was given.
  const first =
    queue.nonce === undefined
      ? `UPDATE send_queues SET next_nonce = next_nonce + $2, lease_until = now() + make_interval(secs => $3)
          WHERE chain_id = $4 AND address = $5 AND lease_owner = $6 AND lease_until > now() RETURNING next_nonce - $2 AS first`
      : 'SELECT $2::numeric AS first';
  const bindings = queue.nonce === undefined ? [plan.length, queue.leaseMs / 1000, queue.chainId, queue.address, queue.owner] : [queue.nonce.toString()];
  const rows = await hotQuery<AttemptRow>(
    db,
    queue.nonce === undefined ? 'custody_attempts_prepare' : 'custody_attempts_prepare_at',
    `WITH q AS (${first}),
     -- keyedRows: taken for one row, joined by index lookups; LIMIT: a constant bound (one generic plan for every call).
     v AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(ord int, transaction_id bigint, purpose text, gas numeric, max_fee_per_gas numeric, max_priority_fee_per_gas numeric) WHERE ${keyedRows('x.transaction_id')} LIMIT ${ATTEMPTS_PER_STATEMENT}),
     t AS (UPDATE transactions t SET nonce = q.first + v.ord, waiting = NULL, updated_at = now() FROM q, v WHERE t.id = v.transaction_id RETURNING 1),
     a AS (INSERT INTO transaction_attempts (transaction_id, purpose, nonce, gas, max_fee_per_gas, max_priority_fee_per_gas, status)
           SELECT v.transaction_id, v.purpose, q.first + v.ord, v.gas, v.max_fee_per_gas, v.max_priority_fee_per_gas, 'prepared' FROM q, v RETURNING ${A_COLS})
     SELECT a.* FROM a LEFT JOIN (SELECT count(*) FROM t) n ON true`,
    [JSON.stringify(plan.map((p, ord) => ({ ord, ...p }))), ...bindings],
  );
  if (rows.length === 0) return undefined;
  const byTransaction = new Map(rows.map(numericAttempt).map((r) => [r.transaction_id, r]));
  return plan.map((p) => {
    const row = byTransaction.get(p.transaction_id);
    if (!row) throw new Error('an attempt was not prepared');
    return row;
  });
}

/** Gives nonces `from` … `upTo − 1` back when they are still the last ones taken (nothing was signed at them). */
export async function giveNoncesBack(db: Executor, chainId: number, address: string, owner: string, from: bigint, upTo: bigint): Promise<boolean> {
  const n = await db('send_queues')
    .where({ chain_id: chainId, address, lease_owner: owner, next_nonce: upTo.toString() })
    .update({ next_nonce: from.toString() });
  return n === 1;
}

export async function queueOf(db: Executor, chainId: number, address: string): Promise<{ next_nonce: string } | undefined> {
  return db('send_queues').where({ chain_id: chainId, address }).first<{ next_nonce: string } | undefined>('next_nonce');
}

/** Moves the queue's next nonce up to the chain's count (the key was used elsewhere): never down. */
export async function raiseNonce(db: Executor, chainId: number, address: string, atLeast: bigint): Promise<void> {
  await db('send_queues').where({ chain_id: chainId, address }).andWhere('next_nonce', '<', atLeast.toString()).update({ next_nonce: atLeast.toString() });
}

/** The oldest queued transactions of a queue, up to `limit`. */
export async function queuedOf(db: Executor, chainId: number, address: string, limit: number): Promise<TransactionRow[]> {
  const rows = await hotQuery<TransactionRow>(
    db,
    'custody_queued_of',
    // A gap fill (its nonce given) before the sends that wait behind its gap.
    `SELECT ${T_COLS} FROM transactions WHERE chain_id = $1 AND from_address = $2 AND status = 'queued' ORDER BY (kind = 'gapFill') DESC, id LIMIT $3`,
    [chainId, address, limit],
  );
  return rows.map(numeric);
}

/** The queues with a queued transaction: what the worker drives. */
export interface QueueKey {
  chain_id: number;
  from_address: string;
}

/** Queues (chain and address) with queued sends in `range`, in key order (a pass rotates through them: Rotation). */
export async function queuesWithWork(db: Executor, range: KeyRange<QueueKey>, limit: number): Promise<QueueKey[]> {
  const { after, through } = range;
  let q = db('transactions')
    .where('status', 'queued')
    .distinct<Array<{ chain_id: string; from_address: string }>>('chain_id', 'from_address')
    .orderBy(['chain_id', 'from_address'])
    .limit(limit);
  if (after) q = q.whereRaw('(chain_id, from_address) > (?, ?)', [after.chain_id, after.from_address]);
  if (through) q = q.whereRaw('(chain_id, from_address) <= (?, ?)', [through.chain_id, through.from_address]);
  const rows = await q;
  return rows.map((r) => ({ chain_id: Number(r.chain_id), from_address: r.from_address }));
}

/** The greatest queue (chain and address) with queued sends, in their order. */
export async function lastQueueWithWork(db: Executor): Promise<QueueKey | undefined> {
  const row = await db('transactions')
    .where('status', 'queued')
    .orderBy([
      { column: 'chain_id', order: 'desc' },
      { column: 'from_address', order: 'desc' },
    ])
    .first<{ chain_id: string; from_address: string } | undefined>('chain_id', 'from_address');
  return row ? { chain_id: Number(row.chain_id), from_address: row.from_address } : undefined;
}

/** The newest of a chain's transactions that are not settled yet. */
export async function lastUnsettled(db: Executor, chainId: number): Promise<number | undefined> {
  const { rows } = await db.raw<{ rows: Array<{ id: number | null }> }>(
    `SELECT max(id) AS id FROM transactions WHERE chain_id = ? AND status IN ('signed', 'submitted', 'mined')`,
    [chainId],
  );
  return rows[0]?.id ?? undefined;
}

/** A chain's transactions in an id range that are not settled yet (signed, submitted or mined), oldest first. */
export async function unsettled(db: Executor, chainId: number, range: KeyRange<number>, limit: number): Promise<TransactionRow[]> {
  const rows = await hotQuery<TransactionRow>(
    db,
    'custody_unsettled',
    `SELECT ${T_COLS} FROM transactions WHERE chain_id = $1 AND status IN ('signed', 'submitted', 'mined') AND id > $3 AND id <= $4 ORDER BY id LIMIT $2`,
    [chainId, limit, range.after ?? 0, range.through ?? Number.MAX_SAFE_INTEGER],
  );
  return rows.map(numeric);
}

/** Nonces of an address on a chain that a live transaction holds (signed, submitted, mined, or queued with a nonce). */
export async function liveNonces(db: Executor, chainId: number, address: string, from: bigint): Promise<Set<bigint>> {
  const rows = await db('transactions')
    .where({ chain_id: chainId, from_address: address })
    .whereIn('status', ['queued', 'signed', 'submitted', 'mined', 'confirmed'])
    .whereNotNull('nonce')
    .andWhere('nonce', '>=', from.toString())
    .select<Array<{ nonce: string }>>('nonce');
  return new Set(rows.map((r) => BigInt(r.nonce)));
}

export async function newestOfQueue(db: Executor, chainId: number, address: string): Promise<TransactionRow | undefined> {
  const row = await db('transactions').where({ chain_id: chainId, from_address: address }).orderBy('id', 'desc').first<TransactionRow | undefined>();
  return row ? numeric(row) : undefined;
}

export async function reloadTransactions(db: Executor, ids: readonly number[]): Promise<TransactionRow[]> {
  if (ids.length === 0) return [];
  const rows = await db('transactions').whereIn('id', ids).select<TransactionRow[]>('*');
  return rows.map(numeric);
}

export async function reloadTransaction(db: Executor, id: number): Promise<TransactionRow | undefined> {
  const [row] = await hotQuery<TransactionRow>(db, 'custody_transaction_reload', `SELECT ${T_COLS} FROM transactions WHERE id = $1`, [id]);
  return row ? numeric(row) : undefined;
}

/** Queued transactions never signed whose time ran out. */
export async function expiredQueued(db: Executor, now: Date, limit: number): Promise<TransactionRow[]> {
  const rows = await db('transactions')
    .where('status', 'queued')
    .andWhere('expires_at', '<', now)
    .whereNotExists(db('transaction_attempts').whereRaw('transaction_attempts.transaction_id = transactions.id'))
    .orderBy('id')
    .limit(limit)
    .select<TransactionRow[]>('*');
  return rows.map(numeric);
}

export async function chainsWithWork(db: Executor): Promise<number[]> {
  const rows = await db('transactions').whereIn('status', ['signed', 'submitted', 'mined']).distinct('chain_id');
  return rows.map((r: { chain_id: string }) => Number(r.chain_id));
}
