import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { hotQuery, keyedRows, pgArray, type Executor } from '../../platform/db/knex.js';
import { AppError, DependencyUnavailableError } from '../../platform/http/errors.js';
import type { Logger } from '../../platform/logging/logger.js';
import type { Clock } from '../../platform/runtime/clock.js';
import { broadcastFact, hexBytes, hexQuantity, quantityOf, RpcError, RpcUnavailable } from '../../platform/eth/rpc.js';
import { isRowFault, isUniqueViolation } from '../../platform/db/pg-errors.js';
import { GroupCommit } from '../../platform/db/group-commit.js';
import { Rotation } from '../../platform/db/rotation.js';
import { NonceConflictError, type ProjectUid } from '../../platform/signer/client.js';
import { setRecent } from '../../platform/runtime/recent.js';
import type { ActiveWallet } from '../wallets/activated.js';
import { auditInsertFrom } from '../audit/record.js';
import { eventRowOf, subscribedEventsFrom } from '../webhooks/record.js';
import { EVENT_ROW_COLUMNS, ranBy, wakeRelaysIfAny } from '../../platform/outbox/repository.js';
import type { EventType } from '../webhooks/catalogue.js';
import { projectById } from '../projects/commands.js';
import { walletById } from '../wallets/commands.js';
import { decideAndSign, type SignDeps } from '../signing/sign.js';
import type { Chain, Chains } from './chains.js';
import { feesFor, replacementFees, type Fees } from './fees.js';
import { gasOf, type GasRefusal } from './gas.js';
import { presentTransaction } from './presenter.js';
import {
  ATTEMPTS_PER_STATEMENT,
  attemptsOf,
  attemptsOfMany,
  claimQueue,
  createQueue,
  deleteAttempt,
  deleteAttempts,
  expiredQueued,
  giveNoncesBack,
  insertAttempt,
  INSERT_COLUMNS,
  nextTransactionIds,
  numeric,
  T_COLS,
  transactionsOfRequests,
  requestKeyOf,
  liveNonces,
  newestOfQueue,
  queuedOf,
  reloadTransaction,
  reloadTransactions,
  queueOf,
  raiseNonce,
  releaseQueue,
  setNonces,
  prepareAttempts,
  lastUnsettled,
  unsettled,
  updateAttempt,
  updateTransaction,
  type AttemptRow,
  type NewTransaction,
  type Status,
  type TransactionRow,
} from './repository.js';

export interface EngineDeps {
  db: Knex;
  now: Clock;
  log: Logger;
  chains: Chains;
  sign: SignDeps;
  /** How long a process holds a queue's lease: renewed with each send it takes. */
  leaseMs: number;
  /** Transactions of a chain looked at per settling pass. */
  settleWindow: number;
}

/** An address no chain puts code at (the zero address): what a transfer to an account without code costs is estimated against it. */
const CODELESS = '0x0000000000000000000000000000000000000000';
/** Sends of one queue signed in one turn of its lease before others get theirs. */
const PER_TURN = 200;
/** Sends of one queue prepared, signed, recorded and broadcast together (one statement prepares them). */
const BATCH = ATTEMPTS_PER_STATEMENT;
/** Calls to a chain's RPC in flight per pass. */
const RPC_PARALLEL = 16;

/**
 * One status change: the transaction as read, the columns that change, the event that says so;
 * `then`, a second change straight after it, written with it as one row update (mined and deep
 * enough in the same pass: `mined`, then `confirmed`), each with its own event and audit entry.
 */
export interface Change {
  row: TransactionRow;
  patch: Partial<TransactionRow>;
  event: EventType;
  then?: { patch: Partial<TransactionRow>; event: EventType };
}

/** The columns a change may set, with their SQL types (the rest never change after a send is accepted). */
const PATCHABLE = {
  status: 'text',
  waiting: 'text',
  nonce: 'numeric',
  hash: 'text',
  block_number: 'bigint',
  block_hash: 'text',
  receipt: 'jsonb',
  error: 'jsonb',
  submitted_at: 'timestamptz',
  cancel_requested: 'boolean',
  speed_up_requested: 'boolean',
} as const satisfies Partial<Record<keyof TransactionRow, string>>;
const PATCH_COLUMNS = Object.keys(PATCHABLE) as Array<keyof typeof PATCHABLE>;

/**
 * Each row set is bounded by a LIMIT of CHANGES_PER_STATEMENT and estimated at one row
 * (keyedRows): taken for 100 rows, or 25, it was joined to its table by reading the table whole,
 * every time (measured: millions of rows read in a benchmark run of a few thousand sends). A constant, not
 * the set's length: the prepared statement's generic plan is then the plan of every call, and
 * PostgreSQL keeps it instead of planning again (with the length as a parameter it planned more
 * than half the calls, 1.2 ms each).
 */
const CHANGES_PER_STATEMENT = 25;
/** The columns of an audit entry's record (JSON) in a status change, with their types. */
const AUDIT_RECORD = [
  'id bigint',
  'organisation_id bigint',
  'project_id bigint',
  'actor text',
  'action text',
  'target text',
  'status int',
  'request_id text',
  'details jsonb',
];
/**
 * CTEs writing each changed row's events (if a subscription wants them; `wake` wakes the relays:
 * the statement must read it through ranBy) and audit entries (`au`, an insert: it runs unread),
 * from JSON record sets keyed by the ids of `changed`, a CTE of the rows written; both in the
 * order of their record set (`ord`), which the outbox's and the audit log's ids then follow.
 */
const eventsAndAudit = (changed: string, events: string, audits: string): string => `
  e AS (SELECT d.* FROM ROWS FROM (jsonb_to_recordset(${events}::jsonb) AS (id bigint, ${EVENT_ROW_COLUMNS.map((c) => `${c} ${c === 'project_id' || c === 'wallet_id' ? 'bigint' : c === 'event_count' ? 'int' : 'text'}`).join(', ')})) WITH ORDINALITY AS d(id, ${EVENT_ROW_COLUMNS.join(', ')}, ord) JOIN ${changed} USING (id)),
  ev AS (${subscribedEventsFrom('e', 'e.ord')}),
  wake AS (${wakeRelaysIfAny('ev')}),
  a AS (SELECT d.* FROM ROWS FROM (jsonb_to_recordset(${audits}::jsonb) AS (${AUDIT_RECORD.join(', ')})) WITH ORDINALITY AS d(${AUDIT_RECORD.map((c) => c.split(' ')[0]).join(', ')}, ord) JOIN ${changed} USING (id)),
  au AS (${auditInsertFrom('(SELECT * FROM a ORDER BY ord) a')} RETURNING 1)`;
const CHANGES_SQL = `
  WITH v AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(id bigint, sequence int, added text[], updated_at timestamptz, set text[], ${PATCH_COLUMNS.map((c) => `${c} ${PATCHABLE[c]}`).join(', ')}) WHERE ${keyedRows('x.id')} LIMIT ${CHANGES_PER_STATEMENT}),
  up AS (
    UPDATE transactions t SET ${PATCH_COLUMNS.map((c) => `${c} = CASE WHEN '${c}' = ANY(v.set) THEN v.${c} ELSE t.${c} END`).join(', ')},
           sequence = t.sequence + cardinality(v.added), events = t.events || v.added, updated_at = v.updated_at
      FROM v WHERE t.id = v.id AND t.sequence = v.sequence
    RETURNING t.id, t.cancel_requested, t.speed_up_requested),
  ${eventsAndAudit('up', '$2', '$3')},
  att AS (
    UPDATE transaction_attempts a SET status = coalesce(w.status, a.status), hash = coalesce(w.hash, a.hash), raw = coalesce(decode(w.raw, 'hex'), a.raw),
           signature_id = coalesce(w.signature_id, a.signature_id), broadcast_at = coalesce(w.broadcast_at, a.broadcast_at)
      FROM (SELECT * FROM jsonb_to_recordset($4::jsonb) AS x(id bigint, status text, hash text, raw text, signature_id bigint, broadcast_at timestamptz) WHERE ${keyedRows('x.id')} LIMIT ${CHANGES_PER_STATEMENT}) w
     WHERE a.id = w.id RETURNING 1)
  SELECT up.id, up.cancel_requested, up.speed_up_requested FROM up ${ranBy('wake')}`;

/** A row's step to record: the row as it stands after it, its event, when, and the request that made it. */
interface Recorded {
  row: TransactionRow;
  event: EventType;
  at: Date;
  requestId: string | null;
}

/** Each step's event (numbered by its row's `sequence`) and audit entry, as the JSON record sets eventsAndAudit reads. */
async function recordsOf(steps: readonly Recorded[]): Promise<{ events: string; audits: string }> {
  // A stream: each subscription receives a transaction's events in this order (webhooks/deliver.ts).
  const eventRows = await Promise.all(
    steps.map(async ({ row: n, event, at }) => ({
      id: n.id,
      ...(await eventRowOf(
        n.project_id,
        [
          {
            type: event,
            data: { ...presentTransaction(n, undefined, false), stream: `transaction:${n.id}`, sequence: n.sequence, events: n.events },
            walletId: n.wallet_id,
          },
        ],
        at,
      )),
    })),
  );
  const audits = steps.map(({ row: n, event, requestId }) => ({
    id: n.id,
    organisation_id: n.organisation_id,
    project_id: n.project_id,
    actor: n.actor,
    action: event,
    target: `transaction:${n.id}`,
    status: n.status === 'failed' ? 422 : 200,
    request_id: requestId,
    details: { walletId: n.wallet_id, chainId: n.chain_id, status: n.status, nonce: n.nonce, hash: n.hash, sequence: n.sequence, error: n.error },
  }));
  return { events: JSON.stringify(eventRows), audits: JSON.stringify(audits) };
}

/** What a change does to attempts besides (their signatures recorded, their broadcast, the ones another was mined instead of). */
export interface AttemptChange {
  id: number;
  status?: AttemptRow['status'];
  hash?: string;
  raw?: Buffer;
  signature_id?: string | null;
  broadcast_at?: Date;
}

/**
 * Status changes of transactions, in the caller's database transaction and in one statement:
 * each row (its event count goes up by one a change, two with its `then`), its events (`wallet.transaction.*`, each with its count as
 * `sequence`, written only when a subscription wants them) and audit entries, with what the
 * change does to attempts, committed together or not at all. A row another process changed since it was read is left alone (that change is
 * theirs to announce): it is answered as it stands now.
 */
export async function changeMany(
  tx: Executor,
  changes: readonly Change[],
  at: Date,
  requestId: string | null = null,
  attempts: readonly AttemptChange[] = [],
): Promise<TransactionRow[]> {
  if (changes.length === 0 && attempts.length === 0) return [];
  if (changes.length > CHANGES_PER_STATEMENT || attempts.length > CHANGES_PER_STATEMENT) {
    // Statement by statement, committed together.
    const run = async (t: Executor) => {
      const out: TransactionRow[] = [];
      for (let i = 0; i < Math.max(changes.length, attempts.length); i += CHANGES_PER_STATEMENT) {
        const part = [changes.slice(i, i + CHANGES_PER_STATEMENT), attempts.slice(i, i + CHANGES_PER_STATEMENT)] as const;
        out.push(...(await changeMany(t, part[0], at, requestId, part[1])));
      }
      return out;
    };
    return tx.isTransaction ? run(tx) : (tx as Knex).transaction(run);
  }
  // Each change's steps (itself, then its `then`), each a row as it stands after it.
  const steps = changes.map(({ row, patch, event, then }) => {
    const first = { ...row, ...patch, sequence: row.sequence + 1, events: [...row.events, event], updated_at: at };
    const second = then && { ...first, ...then.patch, sequence: first.sequence + 1, events: [...first.events, then.event] };
    return second
      ? [
          { row: first, event },
          { row: second, event: then.event },
        ]
      : [{ row: first, event }];
  });
  for (const { patch, then } of changes)
    for (const key of [...Object.keys(patch), ...Object.keys(then?.patch ?? {})]) if (!(key in PATCHABLE)) throw new Error(`a status change cannot set ${key}`);
  const next = steps.map((s) => s[s.length - 1]!.row);
  const values = changes.map(({ row, patch, then }, i) => {
    const set = { ...patch, ...then?.patch };
    return {
      id: row.id,
      sequence: row.sequence,
      added: steps[i]!.map((s) => s.event),
      updated_at: at.toISOString(),
      set: Object.keys(set),
      ...Object.fromEntries(PATCH_COLUMNS.map((c) => [c, c in set ? (set[c] ?? null) : null])),
    };
  });
  const { events, audits } = await recordsOf(steps.flat().map((s) => ({ ...s, at, requestId })));
  // The requests' flags as stored: a cancel or speed-up sets them without a status change (no sequence of its own).
  const rows = await hotQuery<{ id: string | number; cancel_requested: boolean; speed_up_requested: boolean }>(tx, 'custody_transaction_changes', CHANGES_SQL, [
    JSON.stringify(values),
    events,
    audits,
    JSON.stringify(attempts.map((a) => ({ ...a, raw: a.raw?.toString('hex') }))),
  ]);
  const done = new Map(rows.map((r) => [Number(r.id), r]));
  const lost = next.filter((n) => !done.has(n.id)).map((n) => n.id);
  const now = new Map((await reloadTransactions(tx, lost)).map((r) => [r.id, r]));
  return next.map((n) => {
    const written = done.get(n.id);
    if (written) return { ...n, cancel_requested: written.cancel_requested, speed_up_requested: written.speed_up_requested };
    return now.get(n.id) ?? changes.find((c) => c.row.id === n.id)!.row;
  });
}

/** One status change (changeMany of one). */
export async function change(
  tx: Executor,
  row: TransactionRow,
  patch: Partial<TransactionRow>,
  event: EventType,
  at: Date,
  requestId: string | null = null,
): Promise<TransactionRow> {
  const [next] = await changeMany(tx, [{ row, patch, event }], at, requestId);
  return next ?? row;
}

/** The SQL types of a new send's columns, as the accept's arrays carry them (`data` as hex). */
const ACCEPT_TYPES = {
  request_key: 'text',
  organisation_id: 'bigint',
  project_id: 'bigint',
  wallet_id: 'bigint',
  chain_id: 'bigint',
  from_address: 'text',
  to_address: 'text',
  value: 'numeric',
  data: 'text',
  gas: 'numeric',
  max_fee_per_gas: 'numeric',
  max_priority_fee_per_gas: 'numeric',
  kind: 'text',
  caller: 'text',
  actor: 'text',
  expires_at: 'timestamptz',
  nonce: 'numeric',
} as const satisfies Record<(typeof INSERT_COLUMNS)[number], string>;
const ACCEPT_SQL = `
  WITH n AS (
    SELECT * FROM unnest($1::bigint[], $2::timestamptz[], ${INSERT_COLUMNS.map((c, i) => `$${i + 3}::${ACCEPT_TYPES[c]}[]`).join(', ')})
      WITH ORDINALITY AS n(id, at, ${INSERT_COLUMNS.join(', ')}, ord)),
  up AS (
    INSERT INTO transactions (id, ${INSERT_COLUMNS.join(', ')}, status, sequence, events, created_at, updated_at)
    SELECT id, ${INSERT_COLUMNS.map((c) => (c === 'data' ? `decode(data, 'hex')` : c)).join(', ')}, 'queued', 1, ARRAY['wallet.transaction.queued'], at, at FROM n ORDER BY ord
    ON CONFLICT (project_id, request_key) WHERE request_key IS NOT NULL DO NOTHING
    RETURNING ${T_COLS}),
  ${eventsAndAudit('up', `$${INSERT_COLUMNS.length + 3}`, `$${INSERT_COLUMNS.length + 4}`)}
  SELECT up.* FROM up ${ranBy('wake')}`;

/** A send to accept, when, and the request that asked for it. */
export interface Accepting {
  send: NewTransaction;
  at: Date;
  requestId: string | null;
}

/**
 * Accepts sends: `queued` rows with their events and audit entries, in one statement (their ids
 * taken first: the events name them); for a send whose request key made one already, that one
 * (all such found in one more statement). Answers in the sends' order: each send's row, or the
 * error that kept it from being answered (a send written is answered even if finding the others
 * failed).
 */
export async function acceptMany(db: Executor, sends: readonly Accepting[]): Promise<Array<TransactionRow | Error>> {
  if (sends.length === 0) return [];
  const ids = await nextTransactionIds(db, sends.length);
  const rows = sends.map(({ send: t, at }, i): TransactionRow => ({
    ...t,
    id: ids[i]!,
    nonce: t.nonce ?? null,
    status: 'queued',
    waiting: null,
    hash: null,
    sequence: 1,
    events: ['wallet.transaction.queued'],
    block_number: null,
    block_hash: null,
    receipt: null,
    error: null,
    cancel_requested: false,
    speed_up_requested: false,
    created_at: at,
    updated_at: at,
    submitted_at: null,
  }));
  const { events, audits } = await recordsOf(
    rows.map((row, i) => ({ row, event: 'wallet.transaction.queued', at: sends[i]!.at, requestId: sends[i]!.requestId })),
  );
  const column = (c: (typeof INSERT_COLUMNS)[number]) =>
    pgArray(
      rows.map((r) => {
        const v = r[c];
        return v instanceof Date ? v.toISOString() : Buffer.isBuffer(v) ? v.toString('hex') : v;
      }),
    );
  const inserted = await hotQuery<TransactionRow>(db, 'custody_transaction_accept', ACCEPT_SQL, [
    pgArray(ids),
    pgArray(sends.map((s) => s.at.toISOString())),
    ...INSERT_COLUMNS.map(column),
    events,
    audits,
  ]);
  const written = new Map(inserted.map((r) => [Number(r.id), numeric(r)]));
  // Not written: their request keys made one already.
  const skipped = rows.filter((r) => !written.has(r.id) && r.request_key !== null);
  let found: Map<string, TransactionRow> | Error = new Map();
  try {
    found = await transactionsOfRequests(
      db,
      skipped.map((r) => ({ projectId: r.project_id, requestKey: r.request_key! })),
    );
  } catch (err) {
    found = err instanceof Error ? err : new Error('finding sends by their request keys failed', { cause: err });
  }
  return rows.map((r) => {
    const row = written.get(r.id);
    if (row) return row;
    if (found instanceof Error) return found;
    return found.get(requestKeyOf(r.project_id, r.request_key!)) ?? new Error('a send neither inserted nor found by its request key');
  });
}

/** Accepts one send (acceptMany of one), in the caller's transaction or on its own. */
export async function accept(db: Executor, send: NewTransaction, at: Date, requestId: string | null): Promise<TransactionRow> {
  const [row] = await acceptMany(db, [{ send, at, requestId }]);
  if (row instanceof Error) throw row;
  return row!;
}

const EVENT_OF: Partial<Record<Status, EventType>> = {
  signed: 'wallet.transaction.signed',
  submitted: 'wallet.transaction.submitted',
  mined: 'wallet.transaction.mined',
  confirmed: 'wallet.transaction.confirmed',
  failed: 'wallet.transaction.failed',
  replaced: 'wallet.transaction.replaced',
  cancelled: 'wallet.transaction.cancelled',
  expired: 'wallet.transaction.expired',
};

/** The waits the engine itself sets (the node, the market, funds): each ends by itself. Any other is the signer's refusal of a replacement. */
const ENGINE_WAITS: ReadonlySet<string> = new Set(['rpc_unavailable', 'fees_above_cap', 'nonce_used', 'underpriced', 'insufficient_funds']);

/** What stopped a queue's turn, or that it goes on. */
type Step = 'next' | 'stop';

/** A signature of an attempt, not recorded yet. */
interface Signed {
  row: TransactionRow;
  attempt: AttemptRow;
  raw: Buffer;
  hash: string;
  /** The place it took under the policy's limits. */
  reserved: number | undefined;
}

/** What the signer made of an attempt. */
type SignResult =
  | ({ kind: 'signed' } & Omit<Signed, 'row'>)
  | { kind: 'refused'; error: { code: string; message: string } }
  /** The signer holds another transaction at the nonce (`last`: the newest it signed there). */
  | { kind: 'conflict'; last: string | undefined }
  | { kind: 'unavailable' }
  /** The wallet or its project no longer exists. */
  | { kind: 'gone' };

/** Wallets and projects kept per process (a wallet's key and address, a project's identity never change once set). */
const KEPT = 10_000;

export class TransactionEngine {
  readonly #wallets = new Map<number, ActiveWallet>();
  readonly #projects = new Map<number, { id: number; uid: ProjectUid; organisation_id: number }>();
  /** The queues (`chainId:address`) this process holds the lease of now, with when that lease was taken to end. */
  readonly #driving = new Map<string, number>();
  /** The requests waiting for each send's broadcast (awaitAnswer): each settled with the row as this process's broadcast wrote it. */
  readonly #answers = new Map<number, Set<(row: TransactionRow | undefined) => void>>();
  /** The queue turns running in this process (drain waits for them at shutdown). */
  readonly #running = new Set<Promise<boolean>>();

  /** Sends accepted while earlier ones are being written go together in the next statement. */
  readonly #accepts: GroupCommit<Accepting, TransactionRow>;

  constructor(private readonly deps: EngineDeps) {
    this.#accepts = new GroupCommit((sends) => acceptMany(deps.db, sends), { rowFault: isRowFault });
  }

  /** Accepts a send (acceptMany), together with the others accepted meanwhile. */
  accept(send: NewTransaction, at: Date, requestId: string | null): Promise<TransactionRow> {
    return this.#accepts.add({ send, at, requestId });
  }

  async #signingParts(row: TransactionRow): Promise<{ wallet: ActiveWallet; project: { id: number; uid: ProjectUid; organisation_id: number } } | undefined> {
    let wallet = this.#wallets.get(row.wallet_id);
    if (!wallet) {
      wallet = await walletById(this.deps.db, row.wallet_id);
      if (wallet) setRecent(this.#wallets, row.wallet_id, wallet, KEPT);
    }
    let project = this.#projects.get(row.project_id);
    if (!project) {
      const p = await projectById(this.deps.db, row.project_id);
      if (p) {
        project = { id: p.id, uid: p.uid, organisation_id: p.organisation_id };
        setRecent(this.#projects, row.project_id, project, KEPT);
      }
    }
    return wallet && project ? { wallet, project } : undefined;
  }

  get chains(): Chains {
    return this.deps.chains;
  }

  /**
   * `answer`: the send as the broadcast that writes it `submitted` in this process wrote it (this
   * request's or another's that took it in its batch), so that its request answers with it without
   * reading it again and without waiting for the rest of the queue; undefined once `forget` is
   * called (the request answers otherwise). Two requests may wait for one send (the same
   * Idempotency-Key run again): each forgets only its own wait.
   */
  awaitAnswer(id: number): { answer: Promise<TransactionRow | undefined>; forget: () => void } {
    let resolve: (row: TransactionRow | undefined) => void = () => undefined;
    const answer = new Promise<TransactionRow | undefined>((r) => (resolve = r));
    let waiting = this.#answers.get(id);
    if (!waiting) this.#answers.set(id, (waiting = new Set()));
    waiting.add(resolve);
    const forget = () => {
      const set = this.#answers.get(id);
      if (set?.delete(resolve) && set.size === 0) this.#answers.delete(id);
      resolve(undefined);
    };
    return { answer, forget };
  }

  /** Waits for the queue turns running in this process, at most `timeoutMs` (at shutdown: requests' turns go on after their answers). */
  async drain(timeoutMs: number): Promise<void> {
    if (this.#running.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.#running]), new Promise((r) => (timer = setTimeout(r, timeoutMs)))]);
    clearTimeout(timer);
  }

  async #to(row: TransactionRow, status: Status, patch: Partial<TransactionRow> = {}): Promise<TransactionRow> {
    const event = EVENT_OF[status];
    if (!event) throw new Error(`no event for ${status}`);
    const at = new Date(this.deps.now());
    return this.deps.db.transaction((tx) => change(tx, row, { ...patch, status }, event, at));
  }

  /** Notes why a transaction waits, without an event (it is no change of status). */
  async #wait(row: TransactionRow, why: string | null): Promise<void> {
    if (row.waiting !== why) await updateTransaction(this.deps.db, row.id, { waiting: why });
  }

  // ---- Sending: a queue's transactions signed at their nonces, in order ---------------------

  /**
   * Works a queue (one chain, one address) under its lease: its queued transactions get the next
   * nonces, their gas and fees, are signed under the policy and broadcast, oldest first, up to
   * BATCH at a time (one reservation, one record of their signatures, one broadcast, one record of
   * it). A transaction whose fees are above the cap stops the turn: the queue waits (nothing
   * behind it takes its nonce). Another process holding the lease will see what was queued
   * meanwhile: it looks again after it lets go. Answers whether this call worked the queue.
   */
  async drive(chainId: number, address: string, own?: { id: number; until: number; wait: boolean }): Promise<boolean> {
    const turn = this.#drive(chainId, address, own);
    this.#running.add(turn);
    try {
      return await turn;
    } finally {
      this.#running.delete(turn);
    }
  }

  async #drive(chainId: number, address: string, own?: { id: number; until: number; wait: boolean }): Promise<boolean> {
    const chain = this.deps.chains.get(chainId);
    if (!chain) return false;
    let worked = false;
    const key = `${chainId}:${address}`;
    for (let round = 0; ; round++) {
      const owner = randomUUID();
      // This process works the queue already and looks again after it lets go: no claim to ask the
      // database for (unless its holder has run past its lease, which another may then take).
      const holding = (this.#driving.get(key) ?? 0) > this.deps.now();
      let claimed = holding ? undefined : await claimQueue(this.deps.db, chainId, address, owner, this.deps.leaseMs);
      if (claimed === 'absent') {
        let count: string;
        try {
          count = await chain.rpc.call<string>('eth_getTransactionCount', [address, 'pending']);
        } catch (err) {
          if (err instanceof RpcUnavailable || err instanceof RpcError) return worked;
          throw err;
        }
        await createQueue(this.deps.db, chainId, address, BigInt(count));
        claimed = await claimQueue(this.deps.db, chainId, address, owner, this.deps.leaseMs);
      }
      if (claimed === undefined || claimed === 'absent') {
        // Another request or process works the queue, and will reach this send. Only a caller
        // that must answer with its send's hash waits for it (or for its own turn).
        if (!own?.wait) return worked;
        if (this.deps.now() >= own.until || (await reloadTransaction(this.deps.db, own.id))?.status !== 'queued') return worked;
        await sleep(15 + Math.random() * 10);
        continue;
      }
      let stopped = false;
      worked = true;
      this.#driving.set(key, this.deps.now() + this.deps.leaseMs);
      try {
        for (let taken = 0; taken < PER_TURN;) {
          const rows = await queuedOf(this.deps.db, chainId, address, BATCH);
          if (rows.length === 0) break;
          taken += rows.length;
          if ((await this.#advance(chain, rows, owner)) === 'stop') {
            stopped = true;
            break;
          }
        }
      } finally {
        try {
          await releaseQueue(this.deps.db, chainId, address, owner);
        } finally {
          // Before the look below, as the lease: a send accepted after it is seen by that look or claims the queue itself.
          this.#driving.delete(key);
        }
      }
      // What was queued after the last look, while the lease was still held, is this holder's to see.
      if (stopped || round >= 2 || (await queuedOf(this.deps.db, chainId, address, 1)).length === 0) return worked;
    }
  }

  /**
   * The next queued transactions of a queue, oldest first: their attempts prepared (fields and
   * nonces written first), then signed and sent. One with its nonce already (its attempt
   * prepared before a crash, or a gap fill) goes first and on its own.
   */
  async #advance(chain: Chain, rows: readonly TransactionRow[], owner: string): Promise<Step> {
    const first = rows[0];
    if (!first) return 'next';
    if (first.nonce !== null) {
      const prepared = (await attemptsOf(this.deps.db, first.id)).find((a) => a.status === 'prepared');
      if (prepared) return this.#signAndSend(chain, [{ row: first, attempt: prepared }], owner);
    }
    const cut = rows.findIndex((r) => r.nonce !== null);
    const fresh = first.nonce !== null ? [first] : cut === -1 ? rows : rows.slice(0, cut);
    const gas = await this.#gasOf(chain, fresh);
    if (gas === 'unavailable') {
      await this.#wait(first, 'rpc_unavailable');
      return 'stop';
    }
    // A send with no gas fails; the others go on.
    const failed = fresh.filter((r) => typeof gas.get(r.id) === 'object');
    if (failed.length > 0) {
      const at = new Date(this.deps.now());
      await this.deps.db.transaction((tx) =>
        changeMany(
          tx,
          failed.map((row) => ({
            row,
            patch: {
              status: 'failed',
              waiting: null,
              error: { code: 'estimate_failed', message: (gas.get(row.id) as GasRefusal).message },
            },
            event: 'wallet.transaction.failed',
          })),
          at,
        ),
      );
    }
    // Fees: the caller's, else the market's within the caps; a send the caps leave no room for stops the queue there.
    const plan: Array<{ row: TransactionRow; gas: bigint; fees: Fees }> = [];
    let market: Fees | undefined | 'unavailable' | 'unasked' = 'unasked';
    let stop: string | undefined;
    for (const row of fresh) {
      const g = gas.get(row.id);
      if (typeof g !== 'bigint') continue;
      if (row.max_fee_per_gas !== null && row.max_priority_fee_per_gas !== null) {
        plan.push({ row, gas: g, fees: { maxFeePerGas: BigInt(row.max_fee_per_gas), maxPriorityFeePerGas: BigInt(row.max_priority_fee_per_gas) } });
        continue;
      }
      if (market === 'unasked') market = await this.#marketFees(chain);
      if (market === undefined || market === 'unavailable') {
        // Nothing is signed above the cap: the queue waits, and drains when fees fall.
        stop = market === undefined ? 'fees_above_cap' : 'rpc_unavailable';
        if (plan.length === 0) await this.#wait(row, stop);
        break;
      }
      plan.push({ row, gas: g, fees: market });
    }
    if (plan.length === 0) return stop ? 'stop' : 'next';
    const head = plan[0]!.row;
    const attempts = await prepareAttempts(
      this.deps.db,
      {
        chainId: first.chain_id,
        address: first.from_address,
        owner,
        leaseMs: this.deps.leaseMs,
        nonce: head.kind === 'gapFill' && head.nonce !== null ? BigInt(head.nonce) : undefined,
      },
      plan.map((p) => ({
        transaction_id: p.row.id,
        purpose: p.row.kind === 'gapFill' ? 'gapFill' : 'send',
        gas: p.gas.toString(),
        max_fee_per_gas: p.fees.maxFeePerGas.toString(),
        max_priority_fee_per_gas: p.fees.maxPriorityFeePerGas.toString(),
      })),
    );
    // The lease lapsed: another process works the queue now.
    if (!attempts) return 'stop';
    const step = await this.#signAndSend(
      chain,
      plan.map((p, i) => ({ row: { ...p.row, nonce: attempts[i]!.nonce, waiting: null }, attempt: attempts[i]! })),
      owner,
    );
    return stop ? 'stop' : step;
  }

  /** Each send's gas: its own, a no-op's, or found on the chain (gas.ts), or why it has none. */
  async #gasOf(chain: Chain, rows: readonly TransactionRow[]): Promise<Map<number, bigint | GasRefusal> | 'unavailable'> {
    const out = new Map<number, bigint | GasRefusal>();
    for (const r of rows) if (r.gas !== null) out.set(r.id, BigInt(r.gas));
    try {
      const found = await gasOf(
        chain.rpc,
        chain.transfers,
        chain.config.gasMarginPercent,
        rows.filter((r) => !out.has(r.id)),
      );
      for (const [id, gas] of found) out.set(id, gas);
    } catch (err) {
      if (err instanceof RpcUnavailable) return 'unavailable';
      throw err;
    }
    return out;
  }

  /** The market's fees within the chain's caps; undefined when the market is above them. */
  async #marketFees(chain: Chain): Promise<Fees | undefined | 'unavailable'> {
    try {
      return feesFor(chain.config, await chain.fees.market());
    } catch (err) {
      if (err instanceof RpcUnavailable || err instanceof RpcError) return 'unavailable';
      throw err;
    }
  }

  /**
   * Signs prepared attempts in nonce order under the policy (the signer sees
   * `eth_sendTransaction` with its purpose and final fields), records the signed bytes together,
   * then broadcasts them. When one is not signed, the ones after it give their nonces back and
   * are taken again in a later turn. `owner`: the queue's lease, for original sends.
   */
  async #signAndSend(chain: Chain, items: ReadonlyArray<{ row: TransactionRow; attempt: AttemptRow }>, owner?: string): Promise<Step> {
    const signed: Signed[] = [];
    let step: Step = 'next';
    for (let i = 0; i < items.length; i++) {
      const { row, attempt } = items[i]!;
      const outcome = await this.#sign(row, attempt);
      if (outcome.kind === 'signed') {
        signed.push({ row, attempt: outcome.attempt, raw: outcome.raw, hash: outcome.hash, reserved: outcome.reserved });
        continue;
      }
      const rest = items.slice(i + 1);
      if (rest.length > 0) await this.#giveBack(rest, owner);
      step = await this.#notSigned(row, attempt, outcome, owner);
      break;
    }
    const recorded = await this.#recordSigned(signed);
    if (recorded.length === 0) return step;
    const sent = await this.#broadcast(chain, recorded);
    return step === 'stop' ? 'stop' : sent;
  }

  /** One attempt signed, or why not (the nonce conflict of a replacement is asked again once, naming what the signer holds). */
  async #sign(row: TransactionRow, attempt: AttemptRow, again = true): Promise<SignResult> {
    const { db } = this.deps;
    const parts = await this.#signingParts(row);
    if (!parts) return { kind: 'gone' };
    const noOp = attempt.purpose === 'cancel' || attempt.purpose === 'gapFill';
    const gas = BigInt(attempt.gas);
    const maxFee = BigInt(attempt.max_fee_per_gas);
    const value = noOp ? 0n : BigInt(row.value);
    const transaction = {
      type: 2,
      chainId: String(row.chain_id),
      nonce: attempt.nonce,
      gas: attempt.gas,
      maxFeePerGas: attempt.max_fee_per_gas,
      maxPriorityFeePerGas: attempt.max_priority_fee_per_gas,
      ...(noOp ? { to: row.from_address } : row.to_address ? { to: row.to_address } : {}),
      value: value.toString(),
      ...(noOp ? {} : { data: hexBytes(row.data) }),
    };
    const replaced = attempt.replaces ? (await attemptsOf(db, row.id)).find((a) => a.hash === attempt.replaces) : undefined;
    const operation = {
      method: 'eth_sendTransaction',
      params: { transaction, purpose: attempt.purpose, ...(attempt.replaces ? { replaces: attempt.replaces } : {}) },
    };
    const who = { caller: row.caller, actor: row.actor, requestId: null };
    const budget = { cost: gas * maxFee + value, ...(replaced?.signature_id ? { replacing: Number(replaced.signature_id) } : {}) };
    let outcome: Awaited<ReturnType<typeof decideAndSign>>;
    try {
      outcome = await decideAndSign(this.deps.sign, parts.wallet, parts.project, operation, who, budget);
    } catch (err) {
      if (err instanceof NonceConflictError) {
        const last = err.signed[err.signed.length - 1];
        // A replacement or gap fill names what the signer holds there, and is asked once more.
        if (attempt.purpose !== 'send' && last !== undefined && attempt.replaces !== last && again) {
          await updateAttempt(db, attempt.id, { replaces: last });
          return this.#sign(row, { ...attempt, replaces: last }, false);
        }
        return { kind: 'conflict', last };
      }
      if (err instanceof DependencyUnavailableError) return { kind: 'unavailable' };
      if (err instanceof AppError && err.status < 500) return { kind: 'refused', error: { code: err.code, message: err.detail } };
      throw err;
    }
    if (!outcome.allowed) return { kind: 'refused', error: { code: 'policy_denied', message: outcome.message } };
    return {
      kind: 'signed',
      attempt,
      raw: Buffer.from(String(outcome.result['signedTransaction']).slice(2), 'hex'),
      hash: String(outcome.result['hash']),
      reserved: outcome.reserved,
    };
  }

  /** Sends after one that was not signed: their attempts go, their nonces back to the queue; they are taken again, in order. */
  async #giveBack(rest: ReadonlyArray<{ row: TransactionRow; attempt: AttemptRow }>, owner: string | undefined): Promise<void> {
    const first = rest[0];
    const last = rest[rest.length - 1];
    if (!first || !last) return;
    await this.deps.db.transaction(async (tx) => {
      await deleteAttempts(
        tx,
        rest.map((r) => r.attempt.id),
      );
      await setNonces(
        tx,
        rest.map((r) => r.row.id),
        rest.map(() => null),
      );
      if (owner) await giveNoncesBack(tx, first.row.chain_id, first.row.from_address, owner, BigInt(first.attempt.nonce), BigInt(last.attempt.nonce) + 1n);
    });
  }

  /** What follows an attempt the signer did not sign. */
  async #notSigned(row: TransactionRow, attempt: AttemptRow, outcome: Exclude<SignResult, { kind: 'signed' }>, owner: string | undefined): Promise<Step> {
    // The first signature of a transaction (a send or a gap fill); after it, fee bumps and cancels.
    const original = row.status === 'queued';
    switch (outcome.kind) {
      case 'gone':
        await deleteAttempt(this.deps.db, attempt.id);
        await this.#to(row, 'failed', { error: { code: 'wallet_gone', message: 'The wallet or its project no longer exists.' } });
        return 'next';
      case 'unavailable':
        // Prepared, with its nonce: signed by a later turn or pass.
        return 'stop';
      case 'refused':
        await this.#unsigned(row, attempt, owner, original, outcome.error);
        return 'next';
      case 'conflict':
        if (attempt.purpose === 'send' || outcome.last === undefined) {
          // The nonce is someone else's (the key signed elsewhere): this send takes the next one; a gap fill covers it if nothing lands there.
          await this.deps.db.transaction(async (tx) => {
            await deleteAttempt(tx, attempt.id);
            await updateTransaction(tx, row.id, { nonce: null });
          });
          this.deps.log.warn(
            { transactionId: row.id, chainId: row.chain_id, nonce: attempt.nonce },
            'the signer holds another transaction at the nonce: taking the next',
          );
          return owner ? 'next' : 'stop';
        }
        return 'stop';
    }
  }

  /** Nothing was signed: the attempt goes; an original send fails and gives its nonce back. */
  async #unsigned(
    row: TransactionRow,
    attempt: AttemptRow,
    owner: string | undefined,
    original: boolean,
    error: { code: string; message: string },
  ): Promise<void> {
    const at = new Date(this.deps.now());
    await this.deps.db.transaction(async (tx) => {
      await deleteAttempt(tx, attempt.id);
      if (!original) {
        // A refused replacement leaves the transaction as it was, saying why (a refused cancel is not asked again every pass).
        await updateTransaction(tx, row.id, { waiting: error.code, speed_up_requested: false, cancel_requested: false });
        return;
      }
      const nonce = BigInt(attempt.nonce);
      if (owner && row.kind === 'send') await giveNoncesBack(tx, row.chain_id, row.from_address, owner, nonce, nonce + 1n);
      await change(tx, row, { status: 'failed', error, waiting: null, ...(row.kind === 'send' ? { nonce: null } : {}) }, 'wallet.transaction.failed', at);
    });
  }

  /** The signed bytes are written before they leave: after any crash, these same bytes go again. */
  async #recordSigned(signed: readonly Signed[]): Promise<Array<{ row: TransactionRow; attempt: AttemptRow }>> {
    if (signed.length === 0) return [];
    const at = new Date(this.deps.now());
    try {
      const rows = await changeMany(
        this.deps.db,
        signed.map(({ row, hash }) =>
          row.status === 'queued'
            ? { row, patch: { status: 'signed', hash, waiting: null }, event: 'wallet.transaction.signed' }
            : // A fee bump or a cancel: the transaction's hash is the newest attempt's.
              { row, patch: { hash, waiting: null, speed_up_requested: false }, event: 'wallet.transaction.repriced' },
        ),
        at,
        null,
        signed.map((s) => ({
          id: s.attempt.id,
          status: 'signed',
          hash: s.hash,
          raw: s.raw,
          signature_id: s.reserved === undefined ? null : String(s.reserved),
        })),
      );
      return rows.map((row, i) => ({ row, attempt: { ...signed[i]!.attempt, status: 'signed' as const, hash: signed[i]!.hash, raw: signed[i]!.raw } }));
    } catch (err) {
      // The same replacement, made at once by the worker and a request: one attempt holds those bytes already.
      if (!isUniqueViolation(err) || signed.length !== 1) throw err;
      await deleteAttempt(this.deps.db, signed[0]!.attempt.id);
      return [];
    }
  }

  /**
   * Sends attempts' recorded bytes, in nonce order, in one batch; what the node answers is a fact
   * about each transaction, unless no URL answers at all.
   */
  async #broadcast(chain: Chain, items: ReadonlyArray<{ row: TransactionRow; attempt: AttemptRow }>): Promise<Step> {
    const sendable = items.filter((i) => i.attempt.raw);
    const first = sendable[0];
    if (!first) return 'next';
    let answers: unknown[];
    try {
      answers = await chain.rpc.callMany(sendable.map((i) => ({ method: 'eth_sendRawTransaction', params: [hexBytes(i.attempt.raw!)] })));
    } catch (err) {
      if (err instanceof RpcUnavailable) {
        await this.#wait(first.row, 'rpc_unavailable');
        return 'stop';
      }
      throw err;
    }
    const at = new Date(this.deps.now());
    let step: Step = 'next';
    const changes: Change[] = [];
    const broadcast: number[] = [];
    const waits: Array<{ id: number; waiting: string | null }> = [];
    sendable.forEach(({ row, attempt }, i) => {
      const answer = answers[i];
      const fact = answer instanceof RpcError ? broadcastFact(answer) : 'sent';
      if (fact === 'invalid') {
        changes.push({
          row,
          patch: { status: 'failed', error: { code: 'rejected', message: `The node refused the transaction: ${(answer as RpcError).message}` } },
          event: 'wallet.transaction.failed',
        });
        return;
      }
      if (fact === 'underpriced' || fact === 'insufficient_funds') {
        if (row.waiting !== fact) waits.push({ id: row.id, waiting: fact });
        step = 'stop';
        return;
      }
      // Sent, already known, or its nonce already used (the settling pass finds which of ours was mined, or calls it replaced).
      if (attempt.status !== 'broadcast') broadcast.push(attempt.id);
      if (row.status === 'signed')
        changes.push({ row, patch: { status: 'submitted', submitted_at: at, waiting: null }, event: 'wallet.transaction.submitted' });
      // Sent: what it waited for is over, unless that was the signer's refusal of a bump (it stands).
      else if (row.waiting !== null && ENGINE_WAITS.has(row.waiting)) waits.push({ id: row.id, waiting: null });
    });
    for (const w of waits) await updateTransaction(this.deps.db, w.id, { waiting: w.waiting });
    const written = await changeMany(
      this.deps.db,
      changes,
      at,
      null,
      broadcast.map((id) => ({ id, status: 'broadcast', broadcast_at: at })),
    );
    for (const row of written) {
      for (const resolve of this.#answers.get(row.id) ?? []) resolve(row);
      this.#answers.delete(row.id);
    }
    return step;
  }

  // ---- Settling: receipts, depth, reorgs, stuck and dropped transactions, gaps --------------

  /**
   * One pass over a chain's unsettled transactions (docs/transactions.md): a receipt makes a
   * transaction `mined`; a block that left the canonical chain makes it `submitted` again and its
   * same bytes go again; depth makes it `confirmed` (or `failed` if it reverted, `cancelled` if
   * the cancel was mined); a nonce used by none of its attempts makes it `replaced`; a stuck one
   * is re-priced within the caps; the rest are sent again as they are (a node that dropped one
   * takes it back). Gaps under a queue's transactions get a gap fill; queued sends past their
   * time expire.
   */
  async settle(chainId: number): Promise<void> {
    const chain = this.deps.chains.get(chainId);
    if (!chain) return;
    // One pass per chain at a time across the worker processes; the lock goes with its transaction.
    await this.deps.db.transaction(async (lock) => {
      const { rows } = await lock.raw<{ rows: Array<{ got: boolean }> }>(`SELECT pg_try_advisory_xact_lock(hashtext('custody:settle'), ?::int) AS got`, [
        chainId % 2_147_483_647,
      ]);
      if (rows[0]?.got) await this.#settlePass(chain);
    });
  }

  /** Where each chain's settling passes resume (a tenant's transactions that stay unsettled hold no other's back). */
  readonly #settled = new Map<number, Rotation<number>>();
  #rotationOf(chainId: number): Rotation<number> {
    let r = this.#settled.get(chainId);
    if (!r) this.#settled.set(chainId, (r = new Rotation<number>()));
    return r;
  }

  async #settlePass(chain: Chain): Promise<void> {
    const chainId = chain.config.chainId;
    const rows = await this.#rotationOf(chainId).next(this.deps.settleWindow, {
      read: (range, limit) => unsettled(this.deps.db, chainId, range, limit),
      last: () => lastUnsettled(this.deps.db, chainId),
      keyOf: (r) => r.id,
    });
    // A window that wrapped round holds newer rows first: each address's sends go again in nonce order.
    rows.sort((a, b) => a.id - b.id);
    // Nothing unsettled: nothing to ask the node.
    if (rows.length === 0) return;
    const attempts = await attemptsOfMany(
      this.deps.db,
      rows.map((r) => r.id),
    );
    const countOf = this.#counts(chain);
    try {
      await this.#settleMany(chain, rows, attempts, countOf);
    } catch (err) {
      if (err instanceof RpcUnavailable || err instanceof RpcError) return;
      throw err;
    }
    // Gaps and counts raised elsewhere matter only where something waits: a send stuck past the chain's time, or whose nonce was used.
    const now = this.deps.now();
    const waiting = rows.filter(
      (r) => r.status !== 'mined' && (r.waiting === 'nonce_used' || now - (r.submitted_at ?? r.updated_at).getTime() >= chain.config.stuckAfterMs),
    );
    const addresses = [...new Set(waiting.map((r) => r.from_address))];
    await inParallel(addresses, RPC_PARALLEL, async (address) => {
      try {
        await this.#fillGap(chain, address, await countOf(address), rows);
      } catch (err) {
        if (err instanceof RpcUnavailable || err instanceof RpcError) return;
        throw err;
      }
    });
  }

  /** Each address's count of mined transactions, asked once per pass. */
  #counts(chain: Chain): (address: string) => Promise<bigint> {
    const counts = new Map<string, Promise<bigint>>();
    return (address) => {
      let c = counts.get(address);
      if (!c) {
        c = chain.rpc.call<string>('eth_getTransactionCount', [address, 'latest']).then(BigInt);
        counts.set(address, c);
      }
      return c;
    };
  }

  /**
   * Settles transactions: the receipts of their attempts and the blocks of the mined ones asked in
   * batches; the newly mined and the deep enough changed in one statement (a transaction mined deep
   * enough already is `mined` then settled in the same row update, with both events); a mined one whose
   * block left the canonical chain goes back; the rest one by one (#settleUnmined).
   */
  async #settleMany(chain: Chain, rows: readonly TransactionRow[], attempts: Map<number, AttemptRow[]>, countOf: (a: string) => Promise<bigint>) {
    const { rpc, config } = chain;
    const liveOf = (row: TransactionRow) => (attempts.get(row.id) ?? []).filter((a) => a.hash !== null && (a.status === 'signed' || a.status === 'broadcast'));
    const minedRows = rows.filter((r) => r.status === 'mined');
    const pending = rows.filter((r) => r.status !== 'mined');
    const hashes = pending.flatMap((r) => liveOf(r).map((a) => a.hash!));
    const blocks = [...new Set(minedRows.map((r) => BigInt(r.block_number ?? '0')))];
    // The head, the receipts and the mined ones' blocks in one round trip to the node.
    const answers = await rpc.callMany<unknown>([
      { method: 'eth_blockNumber', params: [] },
      ...hashes.map((h) => ({ method: 'eth_getTransactionReceipt', params: [h] })),
      ...blocks.map((b) => ({ method: 'eth_getBlockByNumber', params: [hexQuantity(b), false] })),
    ]);
    const [headAnswer, ...facts] = answers;
    if (headAnswer instanceof RpcError) throw headAnswer;
    const head = quantityOf(headAnswer);
    if (head === undefined) throw new RpcError(-32603, `eth_blockNumber answered ${JSON.stringify(headAnswer)?.slice(0, 80)}`);
    const receipts = facts.slice(0, hashes.length) as Array<Record<string, unknown> | null | RpcError>;
    const blockAnswers = facts.slice(hashes.length) as Array<{ hash?: string } | null | RpcError>;
    const receiptOf = new Map(hashes.map((h, i) => [h, receipts[i]]));
    const blockHash = new Map(blocks.map((b, i) => [b.toString(), blockAnswers[i]]));

    const newlyMined: Change[] = [];
    const superseded: number[] = [];
    const deep: Change[] = [];
    const reorged: TransactionRow[] = [];
    const rest: TransactionRow[] = [];
    for (const row of minedRows) {
      const block = blockHash.get(String(row.block_number ?? '0'));
      if (block instanceof RpcError) continue;
      if (block?.hash !== row.block_hash) reorged.push(row);
      else {
        const c = this.#depthChange(row, attempts.get(row.id) ?? [], head, config.confirmations);
        if (c) deep.push(c);
      }
    }
    for (const row of pending) {
      const live = liveOf(row);
      const answers = live.map((a) => receiptOf.get(a.hash!));
      if (answers.some((r) => r instanceof RpcError)) continue;
      const index = answers.findIndex((r) => r !== null && r !== undefined && typeof (r as Record<string, unknown>)['blockHash'] === 'string');
      const receipt = answers[index] as Record<string, unknown> | undefined;
      const minedAttempt = live[index];
      if (!receipt || !minedAttempt) {
        rest.push(row);
        continue;
      }
      for (const a of live) if (a.id !== minedAttempt.id) superseded.push(a.id);
      newlyMined.push({
        row,
        patch: {
          status: 'mined',
          hash: minedAttempt.hash,
          waiting: null,
          block_number: (quantityOf(receipt['blockNumber']) ?? 0n).toString(),
          block_hash: String(receipt['blockHash']),
          receipt: {
            status: receipt['status'] === '0x1' ? 'success' : 'reverted',
            gasUsed: (quantityOf(receipt['gasUsed']) ?? 0n).toString(),
            effectiveGasPrice: (quantityOf(receipt['effectiveGasPrice']) ?? 0n).toString(),
          },
        },
        event: 'wallet.transaction.mined',
      });
    }
    // Deep enough already when mined (one confirmation, or a pass that came late): settled in the same row update.
    for (const c of newlyMined) {
      const settled = this.#depthChange({ ...c.row, ...c.patch }, attempts.get(c.row.id) ?? [], head, config.confirmations);
      if (settled) c.then = { patch: settled.patch, event: settled.event };
    }
    if (newlyMined.length > 0 || deep.length > 0)
      await changeMany(
        this.deps.db,
        [...newlyMined, ...deep],
        new Date(this.deps.now()),
        null,
        superseded.map((id) => ({ id, status: 'superseded' })),
      );
    for (const row of reorged) {
      // Its block left the canonical chain: submitted again, with the same bytes.
      const at = new Date(this.deps.now());
      const back = await this.deps.db.transaction((tx) =>
        change(tx, row, { status: 'submitted', block_number: null, block_hash: null, receipt: null }, 'wallet.transaction.reorged', at),
      );
      const mined = (attempts.get(row.id) ?? []).find((a) => a.hash === row.hash);
      if (mined) await this.#broadcast(chain, [{ row: back, attempt: mined }]);
    }
    const again: Array<{ row: TransactionRow; attempt: AttemptRow }> = [];
    await inParallel(rest, RPC_PARALLEL, async (row) => {
      try {
        const as = await this.#settleUnmined(chain, row, attempts.get(row.id) ?? [], countOf);
        if (as) again.push(as);
      } catch (err) {
        if (err instanceof RpcUnavailable || err instanceof RpcError) return;
        throw err;
      }
    });
    // Sent again as they are, in one batch: a node that dropped one takes it back, one that has it says so.
    again.sort((a, b) => (BigInt(a.attempt.nonce) < BigInt(b.attempt.nonce) ? -1 : 1));
    await this.#broadcast(chain, again);
  }

  /** A signed or submitted transaction with no receipt: replaced, re-signed, re-priced, or to be sent again as it is (answered). */
  async #settleUnmined(
    chain: Chain,
    row: TransactionRow,
    attempts: AttemptRow[],
    countOf: (a: string) => Promise<bigint>,
  ): Promise<{ row: TransactionRow; attempt: AttemptRow } | undefined> {
    const { config } = chain;
    const nonce = BigInt(row.nonce ?? '0');
    if ((await countOf(row.from_address)) > nonce) {
      // Its nonce is used, by none of its attempts. A receipt can lag a block: decided on the next pass.
      if (row.waiting === 'nonce_used') await this.#to(row, 'replaced', { waiting: null });
      else await this.#wait(row, 'nonce_used');
      return;
    }
    const current = attempts[attempts.length - 1];
    if (!current) return;
    if (current.status === 'prepared') {
      await this.#signAndSend(chain, [{ row, attempt: current }]);
      return;
    }
    const cancel = row.cancel_requested && current.purpose !== 'cancel';
    // Re-priced when stuck, unless it waits for funds (a higher fee only costs more once it is
    // funded) or the signer refused its last bump (asked again only by a speed-up, not every pass).
    const bumpable = row.waiting === null || (ENGINE_WAITS.has(row.waiting) && row.waiting !== 'insufficient_funds');
    const stuck = bumpable && this.deps.now() - current.created_at.getTime() >= config.stuckAfterMs;
    if (current.hash !== null && (cancel || row.speed_up_requested || stuck)) {
      if (await this.#replace(chain, row, current, cancel ? 'cancel' : current.purpose === 'send' ? 'speedUp' : current.purpose)) return;
    }
    return { row, attempt: current };
  }

  /** A mined transaction `confirmations` blocks deep: `confirmed`, `failed` (it reverted) or `cancelled` (its cancel was mined). */
  #depthChange(row: TransactionRow, attempts: AttemptRow[], head: bigint, confirmations: number): Change | undefined {
    if (head - BigInt(row.block_number ?? '0') + 1n < BigInt(confirmations)) return undefined;
    const minedAttempt = attempts.find((a) => a.hash === row.hash);
    // A cancel took the nonce, even one that reverted (a wallet's EIP-7702 code refused the no-op).
    if (minedAttempt?.purpose === 'cancel') return { row, patch: { status: 'cancelled' }, event: 'wallet.transaction.cancelled' };
    if (row.receipt?.['status'] !== 'success')
      return {
        row,
        patch: { status: 'failed', error: { code: 'reverted', message: 'The transaction reverted; its receipt says so.' } },
        event: 'wallet.transaction.failed',
      };
    return { row, patch: { status: 'confirmed' }, event: 'wallet.transaction.confirmed' };
  }

  /**
   * The gas of a no-op from `address` (a transfer of nothing to itself): the intrinsic gas where
   * the chain charges a transfer that and the wallet has no code, else the node's estimate and the
   * margin (a chain that folds its L1 cost into gas refuses a no-op at 21,000). A wallet with an
   * EIP-7702 delegation runs its code on the no-op: when that reverts (the estimate is refused),
   * the no-op is priced as a transfer to an account without code, and goes: mined reverted, it
   * still takes its nonce, which is all a cancel or a gap fill is for.
   */
  async #noOpGas(chain: Chain, address: string): Promise<bigint | GasRefusal | 'unavailable'> {
    const priced = (to: string) =>
      gasOf(chain.rpc, chain.transfers, chain.config.gasMarginPercent, [
        { id: 0, from_address: address, to_address: to, value: '0', data: Buffer.alloc(0) },
      ]).then((gas) => gas.get(0) ?? 'unavailable');
    try {
      const self = await priced(address);
      return typeof self === 'object' ? await priced(CODELESS) : self;
    } catch (err) {
      if (err instanceof RpcUnavailable) return 'unavailable';
      throw err;
    }
  }

  /** A replacement at the same nonce with higher fees (a fee bump, a cancel); false when the caps leave no room. */
  async #replace(chain: Chain, row: TransactionRow, current: AttemptRow, purpose: AttemptRow['purpose']): Promise<boolean> {
    let market;
    try {
      market = await chain.fees.market();
    } catch (err) {
      if (err instanceof RpcUnavailable || err instanceof RpcError) return false;
      throw err;
    }
    const fees = replacementFees(
      chain.config,
      { maxFeePerGas: BigInt(current.max_fee_per_gas), maxPriorityFeePerGas: BigInt(current.max_priority_fee_per_gas) },
      market,
    );
    if (!fees) {
      await this.#wait(row, 'fees_above_cap');
      return false;
    }
    // A cancel's no-op is priced as any transfer is on this chain; a bump keeps the gas it bumps.
    let gas = current.gas;
    if (purpose === 'cancel' && current.purpose !== 'cancel') {
      const noOp = await this.#noOpGas(chain, row.from_address);
      if (noOp === 'unavailable') {
        await this.#wait(row, 'rpc_unavailable');
        return false;
      }
      if (typeof noOp !== 'bigint') {
        // Asked again only by a new cancel, as a refused one is.
        await updateTransaction(this.deps.db, row.id, { waiting: 'estimate_failed', cancel_requested: false });
        return false;
      }
      gas = noOp.toString();
    }
    const attempt = await insertAttempt(this.deps.db, {
      transaction_id: row.id,
      purpose,
      nonce: current.nonce,
      gas,
      max_fee_per_gas: fees.maxFeePerGas.toString(),
      max_priority_fee_per_gas: fees.maxPriorityFeePerGas.toString(),
      replaces: current.hash,
    });
    await this.#signAndSend(chain, [{ row, attempt }]);
    return true;
  }

  /**
   * A nonce under the queue's next one that no live transaction holds, while a transaction after
   * it has waited longer than the chain's stuck time: nothing after it can be mined until
   * something is. It is filled with a no-op (a transfer of nothing to the wallet itself), itself a
   * policy-checked, audited send; if the signer holds a signature there, the fill names it as
   * replaced.
   */
  async #fillGap(chain: Chain, address: string, count: bigint, waiting: readonly TransactionRow[]): Promise<void> {
    const { db } = this.deps;
    const chainId = chain.config.chainId;
    const queue = await queueOf(db, chainId, address);
    if (!queue) return;
    const next = BigInt(queue.next_nonce);
    if (count > next) {
      // The key was used elsewhere: the queue goes on from the chain's count.
      await raiseNonce(db, chainId, address, count);
      return;
    }
    if (count >= next) return;
    const now = this.deps.now();
    const blocked = waiting.some(
      (r) =>
        r.from_address === address &&
        r.nonce !== null &&
        BigInt(r.nonce) > count &&
        now - (r.submitted_at ?? r.updated_at).getTime() >= chain.config.stuckAfterMs,
    );
    if (!blocked) return;
    const held = await liveNonces(db, chainId, address, count);
    if (held.has(count)) return;
    const of = await newestOfQueue(db, chainId, address);
    if (!of) return;
    const gas = await this.#noOpGas(chain, address);
    if (typeof gas !== 'bigint') {
      this.deps.log.warn(
        { chainId, nonce: count.toString(), reason: gas === 'unavailable' ? 'rpc_unavailable' : gas.message },
        'a gap in a queue waits: no gas for its no-op',
      );
      return;
    }
    const at = new Date(now);
    const fill = await accept(
      db,
      {
        organisation_id: of.organisation_id,
        project_id: of.project_id,
        wallet_id: of.wallet_id,
        chain_id: chainId,
        from_address: address,
        to_address: address,
        value: '0',
        data: Buffer.alloc(0),
        gas: gas.toString(),
        max_fee_per_gas: null,
        max_priority_fee_per_gas: null,
        kind: 'gapFill',
        caller: 'server',
        actor: 'system:gap-fill',
        expires_at: new Date(now + chain.config.queuedTtlMs),
        nonce: count.toString(),
        request_key: null,
      },
      at,
      null,
    );
    this.deps.log.warn({ chainId, nonce: count.toString(), transactionId: fill.id }, 'a gap in a queue: filling it with a no-op');
    await this.drive(chainId, address);
  }

  /**
   * Queued sends past their time, never signed, become `expired` (up to 500 a call; answers how
   * many). A pass of its own: a chain where every send waits (fees above the cap) has nothing to
   * settle, and its sends must still expire.
   */
  async expire(): Promise<number> {
    const rows = await expiredQueued(this.deps.db, new Date(this.deps.now()), 500);
    for (const row of rows) await this.#to(row, 'expired', { waiting: null });
    return rows.length;
  }

  // ---- What a caller asks of one transaction --------------------------------------------------

  /** A cancel: a queued send is cancelled at once; a signed one gets a no-op at its nonce, with higher fees. */
  async cancel(row: TransactionRow, requestId: string | null): Promise<TransactionRow> {
    if (row.status === 'queued' && row.nonce === null) {
      const at = new Date(this.deps.now());
      return this.deps.db.transaction((tx) => change(tx, row, { status: 'cancelled', waiting: null }, 'wallet.transaction.cancelled', at, requestId));
    }
    await updateTransaction(this.deps.db, row.id, { cancel_requested: true });
    await this.#now(row.id);
    return (await this.#reload(row.id)) ?? row;
  }

  /** A fee bump now, within the caps. */
  async speedUp(row: TransactionRow): Promise<TransactionRow> {
    await updateTransaction(this.deps.db, row.id, { speed_up_requested: true });
    await this.#now(row.id);
    return (await this.#reload(row.id)) ?? row;
  }

  async #reload(id: number): Promise<TransactionRow | undefined> {
    return reloadTransaction(this.deps.db, id);
  }

  /** Settles one transaction now rather than at the next pass. */
  async #now(id: number): Promise<void> {
    const row = await this.#reload(id);
    if (!row) return;
    const chain = this.deps.chains.get(row.chain_id);
    if (!chain || (row.status !== 'signed' && row.status !== 'submitted')) return;
    try {
      await this.#settleMany(chain, [row], new Map([[row.id, await attemptsOf(this.deps.db, row.id)]]), this.#counts(chain));
    } catch (err) {
      if (err instanceof RpcUnavailable || err instanceof RpcError) return;
      throw err;
    }
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `fn` over `items`, at most `limit` at a time. */
async function inParallel<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await fn(item);
    }
  });
  await Promise.all(workers);
}
