import { randomUUID } from 'node:crypto';
import { pgArray, type Executor, type Knex } from '../db/knex.js';
import type { Page } from '../http/pagination.js';

export const OUTBOX_CHANNEL = 'custody_outbox';

export interface OutboxRow {
  id: number;
  project_id: number;
  /** `event` (a recorded event, fanned out by its feeder), `delivery`, or a kind a domain's manifest declares (`wallet.create`). */
  kind: string;
  delivery_kind: string | null;
  wallet_id: number | null;
  subscription_id: number | null;
  event: string | null;
  /** For subscription deliveries: the id of the event (envelope) they carry. */
  event_id: string | null;
  url: string | null;
  payload: string | null;
  message_id: string;
  status: 'pending' | 'done' | 'failed';
  attempts: number;
  next_attempt_at: Date | null;
  last_status: number | null;
  last_error: string | null;
  last_response_body: string | null;
  last_attempt_at: Date | null;
  /** The host (and port) a delivery goes to, for the per-host bound; null for other work. */
  destination: string | null;
  /** One manual attempt (failedDeliveries/{id}/retry): a failure goes straight back to failed. */
  manual_retry: boolean;
  created_at: Date;
}

export const newMessageId = (): string => `msg_${randomUUID().replace(/-/g, '')}`;

/** Transactions that already asked to wake the relays: their commit does it once, whatever they queued. */
const notified = new WeakSet<Knex.Transaction>();

/**
 * Wakes the relays when the surrounding transaction commits (NOTIFY is transactional), once per
 * transaction: later calls in the same one send nothing. A savepoint is a transaction object of its
 * own, so a notice rolled back with it is sent again by the next write of the enclosing one; on the
 * pool (no transaction) every call notifies, each statement committing by itself.
 */
export async function notifyOutbox(db: Executor): Promise<void> {
  if (db.isTransaction === true) {
    const tx = db as Knex.Transaction;
    if (notified.has(tx)) return;
    notified.add(tx);
  }
  await db.raw('SELECT pg_notify(?, ?)', [OUTBOX_CHANNEL, '']);
}

/**
 * A statement's last part that wakes the relays once if the CTE `queued` returned a row: for a
 * statement that is its transaction on its own (a group commit), so one notice per commit. As a
 * CTE of its own, its statement must read it through `ranBy`: a SELECT in WITH runs only as far
 * as the statement reads it.
 */
export const wakeRelaysIfAny = (queued: string): string => `SELECT pg_notify('${OUTBOX_CHANNEL}', '') FROM (SELECT 1 FROM ${queued} LIMIT 1) queued`;

/**
 * The join that makes a statement run the CTE `cte` (a wake) to its end. A `LEFT JOIN … ON true`
 * to its count is removed by the planner (its row is unique and unread), and the CTE never runs:
 * the transactions' events waited for the relays' next poll.
 */
export const ranBy = (cte: string): string => `CROSS JOIN (SELECT count(*) FROM ${cte}) ${cte}_ran`;

type NewOutboxRow = Pick<OutboxRow, 'project_id' | 'kind'> &
  Partial<Pick<OutboxRow, 'delivery_kind' | 'wallet_id' | 'subscription_id' | 'event' | 'event_id' | 'url' | 'payload' | 'destination'>>;

/** Queues one row (unless a unique rule says it is already queued: then undefined) and wakes the relays on commit. */
export async function enqueue(db: Executor, row: NewOutboxRow): Promise<OutboxRow | undefined> {
  const { rows } = await db.raw<{ rows: OutboxRow[] }>(
    `INSERT INTO outbox (project_id, kind, delivery_kind, wallet_id, subscription_id, event, event_id, url, payload, message_id, destination)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING *`,
    [
      row.project_id,
      row.kind,
      row.delivery_kind ?? null,
      row.wallet_id ?? null,
      row.subscription_id ?? null,
      row.event ?? null,
      row.event_id ?? null,
      row.url ?? null,
      row.payload ?? null,
      newMessageId(),
      row.destination ?? null,
    ],
  );
  await notifyOutbox(db);
  return rows[0];
}

/** Queues the creation of a wallet whose key is not made yet (createasync), in the caller's transaction. */
export async function enqueueWalletCreation(tx: Executor, wallet: { projectId: number; walletId: number }): Promise<void> {
  await enqueue(tx, { project_id: wallet.projectId, kind: 'wallet.create', wallet_id: wallet.walletId });
}

/** The values of a row of recorded events (kind `event`): its envelopes as one JSON array, and their count. */
export interface NewEventRow {
  project_id: number;
  /** The event type, or `bundle` for several. */
  event: string;
  payload: string;
  event_count: number;
  message_id: string;
  wallet_id: number | null;
}

/** NewEventRow's columns, in the order eventRowsFrom reads them from its source. */
export const EVENT_ROW_COLUMNS = ['project_id', 'event', 'payload', 'event_count', 'message_id', 'wallet_id'] as const satisfies ReadonlyArray<
  keyof NewEventRow
>;

const EVENT_ROW_INSERT = 'INSERT INTO outbox (project_id, kind, event, payload, event_count, message_id, wallet_id, next_attempt_at)';

/** Records a row of events in the caller's transaction (the fan-out turns it into deliveries) and wakes the relays on commit. */
export async function insertEventRow(tx: Executor, row: NewEventRow): Promise<void> {
  await tx.raw(
    `${EVENT_ROW_INSERT} VALUES (?::bigint, 'event', ?, ?, ?, ?, ?, NULL)`,
    EVENT_ROW_COLUMNS.map((c) => row[c]),
  );
  await notifyOutbox(tx);
}

/**
 * SQL inserting an event row for each row of `source` (a CTE with EVENT_ROW_COLUMNS) for which
 * `wanted(alias)` holds, in the order of `orderBy` if given (the outbox's ids follow it), returning
 * a row for each it inserted; for a statement that composes it.
 */
export const eventRowsFrom = (source: string, wanted: (row: string) => string, orderBy?: string): string =>
  `${EVENT_ROW_INSERT} SELECT e.project_id, 'event', ${EVENT_ROW_COLUMNS.slice(1)
    .map((c) => `e.${c}`)
    .join(', ')}, NULL FROM ${source} e
    WHERE ${wanted('e')}${orderBy ? ` ORDER BY ${orderBy}` : ''}
   RETURNING 1`;

/** SQL: whether a wallet-created delivery of the wallet whose id is `walletId` (a column) failed. */
export const hasFailedWalletDelivery = (walletId: string): string =>
  `EXISTS (SELECT 1 FROM outbox o WHERE o.wallet_id = ${walletId} AND o.kind = 'delivery' AND o.status = 'failed')`;

/** Puts every failed wallet delivery of a wallet back to pending, due now; wakes the relays if there was one. Returns how many. */
export async function resendFailedWalletDeliveries(db: Executor, walletId: number): Promise<number> {
  const { rowCount } = await db.raw<{ rowCount: number }>(
    `UPDATE outbox SET status = 'pending', next_attempt_at = now(), locked_until = NULL
      WHERE wallet_id = ? AND kind = 'delivery' AND delivery_kind = 'wallet' AND status = 'failed'`,
    [walletId],
  );
  if (rowCount > 0) await notifyOutbox(db);
  return rowCount;
}

/** A project's failed deliveries, a page by id. */
export async function failedDeliveriesOf(db: Executor, projectId: number, page: Page): Promise<OutboxRow[]> {
  return db<OutboxRow>('outbox')
    .where({ project_id: projectId, kind: 'delivery', status: 'failed' })
    .where('id', '>', page.afterId)
    .orderBy('id')
    .limit(page.limit + 1);
}

/** A delivery of a project, locked (FOR UPDATE) until the caller's transaction ends. */
export async function lockDelivery(tx: Executor, projectId: number, deliveryId: number): Promise<OutboxRow | undefined> {
  const row: OutboxRow | undefined = await tx<OutboxRow>('outbox').where({ id: deliveryId, project_id: projectId, kind: 'delivery' }).forUpdate().first();
  return row;
}

/** Makes a delivery due now for one manual attempt (a failure sends it straight back to failed); wakes the relays on commit. */
export async function dueForManualRetry(tx: Executor, deliveryId: number): Promise<OutboxRow | undefined> {
  const [updated] = await tx<OutboxRow>('outbox')
    .where({ id: deliveryId })
    .update({ status: 'pending', next_attempt_at: tx.fn.now(), locked_until: null, manual_retry: true } as never)
    .returning('*');
  await notifyOutbox(tx);
  return updated;
}

/** One kind of row a claim takes: `kind`, and `delivery_kind` ('' for none). */
export interface KindKey {
  kind: string;
  deliveryKind: string;
}

export interface Claim {
  kinds: readonly KindKey[];
  limit: number;
  /** Rows taken from one group (one host and project) at most: what it may have in flight. */
  perGroup: number;
  leaseMs: number;
  busyProjects: readonly number[];
  busyHosts: readonly string[];
  /** The tenancy's condition on a project id column (src/access/tenancy/quiet.ts). */
  claimable: (projectId: string) => string;
}

/** The conditions of the index outbox_due_by_group (rows with work left), on the given table alias. */
const withWork = (t: string) => `${t}.status IN ('pending', 'failed') AND ${t}.next_attempt_at IS NOT NULL AND ${t}.kind <> 'event'`;

/**
 * The claim's statement and bindings (exported for its plan's test). The due rows of a lane's
 * kinds are grouped by destination host and project (index outbox_due_by_group): the groups that
 * have work are found one index probe each (a loose index scan), a busy host's or project's group
 * or a quiet tenant's is skipped whole, and each other group gives its oldest due rows. So a
 * claim reads about one entry per group plus the rows it takes, however many rows wait behind a
 * busy host (a dead endpoint's backlog was read and filtered out row by row by every claim).
 * The oldest due rows across groups are then locked (SKIP LOCKED: relays side by side never take
 * the same row; one that lost a race takes fewer) and leased, each found by its id (`= ANY(ARRAY(…))`:
 * an `IN (…)` let the planner hash-join a scan of the whole table; the lock step rechecks only the
 * status and the lease, since the due index's own conditions there made it AND that whole index in).
 */
export function claimDueStatement(claim: Claim): { sql: string; bindings: Knex.RawBinding[] } {
  const next = (from: string, after: string) => `SELECT o.kind, coalesce(o.delivery_kind, '') AS dkind, coalesce(o.destination, '') AS host, o.project_id
        FROM outbox o
       WHERE o.kind = ${from}.kind AND coalesce(o.delivery_kind, '') = ${from}.dkind AND ${withWork('o')} ${after}
       ORDER BY coalesce(o.destination, ''), o.project_id LIMIT 1`;
  const sql = `WITH RECURSIVE lane AS (SELECT * FROM unnest(?::text[], ?::text[]) AS l(kind, dkind)),
     groups AS (
       SELECT f.* FROM lane l CROSS JOIN LATERAL (${next('l', '')}) f
       UNION ALL
       SELECT n.* FROM groups g CROSS JOIN LATERAL (${next('g', "AND (coalesce(o.destination, ''), o.project_id) > (g.host, g.project_id)")}) n
     )
     UPDATE outbox SET locked_until = now() + make_interval(secs => ?)
      WHERE id = ANY(ARRAY(
        SELECT t.id FROM outbox t
         WHERE t.id = ANY(ARRAY(
           SELECT c.id FROM groups g CROSS JOIN LATERAL (
             SELECT d.id, d.next_attempt_at FROM outbox d
              WHERE d.kind = g.kind AND coalesce(d.delivery_kind, '') = g.dkind AND coalesce(d.destination, '') = g.host AND d.project_id = g.project_id
                AND ${withWork('d')} AND d.next_attempt_at <= now() AND (d.locked_until IS NULL OR d.locked_until < now())
              ORDER BY d.next_attempt_at, d.id LIMIT ?) c
            WHERE g.host <> ALL(?::text[]) AND g.project_id <> ALL(?::bigint[]) AND ${claim.claimable('g.project_id')}
            ORDER BY c.next_attempt_at, c.id LIMIT ?))
           AND t.status IN ('pending', 'failed') AND (t.locked_until IS NULL OR t.locked_until < now())
         FOR UPDATE SKIP LOCKED))
      RETURNING *`;
  return {
    sql,
    bindings: [
      pgArray(claim.kinds.map((k) => k.kind)),
      pgArray(claim.kinds.map((k) => k.deliveryKind)),
      claim.leaseMs / 1000,
      Math.min(claim.perGroup, claim.limit),
      pgArray([...claim.busyHosts]),
      pgArray([...claim.busyProjects]),
      claim.limit,
    ],
  };
}

/** Takes up to `limit` due rows of the given kinds (a lane's) for this relay and leases them (claimDueStatement). */
export async function claimDue(db: Executor, claim: Claim): Promise<ClaimedRow[]> {
  const { sql, bindings } = claimDueStatement(claim);
  const { rows } = await db.raw<{ rows: OutboxRow[] }>(sql, bindings);
  return rows.sort((x, y) => x.id - y.id);
}

/** A row as claimed; `context` is what its job kind loaded for it (registry.ts `prepare`). */
export type ClaimedRow = OutboxRow & { context?: unknown };

/** Gives claimed rows back at once (more were claimed for an endpoint than it may have in flight). */
export async function release(db: Executor, ids: readonly number[]): Promise<void> {
  if (ids.length > 0) await db('outbox').whereIn('id', ids).update({ locked_until: null });
}

export interface Outcome {
  status: 'pending' | 'done' | 'failed';
  /** Try again this long after now (the database's clock, which every relay shares); null: never by itself. */
  retryInMs: number | null;
  attempted: boolean;
  lastStatus?: number | null;
  lastError?: string | null;
  lastResponseBody?: string | null;
  url?: string | null;
}

/**
 * Records the outcomes of attempts, many in one statement (the relay batches what finishes
 * together), and releases their leases.
 */
export async function settleMany(db: Executor, items: ReadonlyArray<{ id: number; outcome: Outcome }>): Promise<void> {
  if (items.length === 0) return;
  const col = <T extends string | number | boolean | null>(f: (o: Outcome) => T) => pgArray(items.map((i) => f(i.outcome)));
  await db.raw(
    `UPDATE outbox o
        SET status = u.status,
            next_attempt_at = CASE WHEN u.retry_ms IS NULL THEN NULL ELSE now() + u.retry_ms * interval '1 millisecond' END,
            locked_until = NULL,
            manual_retry = false,
            attempts = o.attempts + CASE WHEN u.attempted THEN 1 ELSE 0 END,
            last_attempt_at = CASE WHEN u.attempted THEN now() ELSE o.last_attempt_at END,
            last_status = CASE WHEN u.attempted THEN u.last_status ELSE o.last_status END,
            last_error = CASE WHEN u.attempted OR u.last_error IS NOT NULL THEN u.last_error ELSE o.last_error END,
            last_response_body = CASE WHEN u.attempted THEN u.last_response_body ELSE o.last_response_body END,
            url = coalesce(u.url, o.url)
       FROM unnest(?::bigint[], ?::text[], ?::bigint[], ?::boolean[], ?::int[], ?::text[], ?::text[], ?::text[])
            AS u(id, status, retry_ms, attempted, last_status, last_error, last_response_body, url)
      WHERE o.id = u.id`,
    [
      pgArray(items.map((i) => i.id)),
      col((o) => o.status),
      col((o) => (o.retryInMs === null ? null : Math.round(o.retryInMs))),
      col((o) => o.attempted),
      col((o) => o.lastStatus ?? null),
      col((o) => o.lastError ?? null),
      col((o) => o.lastResponseBody ?? null),
      col((o) => o.url ?? null),
    ],
  );
}

/** Rows not done yet, by kind and status: the outbox depth gauge. */
/**
 * What the outbox gauges show (platform/logging/metrics.ts), in one scan of the rows not done:
 * the depth by kind and status; by kind, how long the oldest pending row has been due (its next
 * attempt, or for an event row not fanned out yet its recording; rows waiting for a subscription's
 * backlog or of a quiet tenant are not due work); by delivery kind, the age of the oldest delivery
 * still retrying after a failed attempt. `active` is the tenancy's condition on a project id column.
 */
export async function outboxGauges(
  db: Executor,
  active: (projectId: string) => string,
): Promise<{
  depth: Array<{ kind: string; status: string; n: number }>;
  dueAge: Array<{ kind: string; seconds: number }>;
  failingDeliveryAge: Array<{ kind: string; seconds: number }>;
}> {
  const { rows } = await db.raw<{
    rows: Array<{ kind: string; status: string; delivery_kind: string | null; n: number; due_age: number | null; failing_age: number | null }>;
  }>(
    `SELECT kind, status, delivery_kind, count(*)::int AS n,
            extract(epoch FROM now() - min(CASE WHEN kind = 'event' THEN CASE WHEN owed_to IS NULL THEN created_at END ELSE next_attempt_at END)
              FILTER (WHERE status = 'pending' AND ${active('o.project_id')}))::float8 AS due_age,
            extract(epoch FROM now() - min(created_at)
              FILTER (WHERE kind = 'delivery' AND status = 'pending' AND attempts > 0 AND ${active('o.project_id')}))::float8 AS failing_age
       FROM outbox o WHERE status IN ('pending', 'failed') GROUP BY kind, status, delivery_kind`,
  );
  const depth = new Map<string, { kind: string; status: string; n: number }>();
  const due = new Map<string, number>();
  const failing = new Map<string, number>();
  for (const r of rows) {
    const key = `${r.kind}\n${r.status}`;
    depth.set(key, { kind: r.kind, status: r.status, n: (depth.get(key)?.n ?? 0) + r.n });
    // A pending kind whose earliest row falls due later has none due: 0.
    if (r.status === 'pending') due.set(r.kind, Math.max(due.get(r.kind) ?? 0, r.due_age ?? 0));
    if (r.kind === 'delivery' && r.delivery_kind !== null && r.status === 'pending')
      failing.set(r.delivery_kind, Math.max(failing.get(r.delivery_kind) ?? 0, r.failing_age ?? 0));
  }
  return {
    depth: [...depth.values()],
    dueAge: [...due].map(([kind, seconds]) => ({ kind, seconds })),
    failingDeliveryAge: [...failing].map(([kind, seconds]) => ({ kind, seconds })),
  };
}

/**
 * SQL counting, up to `bound` (a parameter), the pending delivery rows of the subscription whose id
 * is `subscription` (a column), on their own index; for a statement that composes it.
 */
export const pendingDeliveriesOf = (subscription: string, bound: string): string =>
  `(SELECT count(*) FROM (SELECT 1 FROM outbox b WHERE b.subscription_id = ${subscription} AND b.kind = 'delivery' AND b.status = 'pending' LIMIT ${bound}) n)`;

/** An event row as the fan-out leases it. */
export interface LeasedEventRow {
  id: number;
  project_id: number;
  /** The subscriptions the row still owes its events to; null for a row not fanned out yet. */
  owed_to: number[] | null;
  /** How many events it holds. */
  events: number;
}

export interface EventLease {
  /** Rows owing one of these subscriptions; null: rows not fanned out yet. */
  owing: readonly number[] | null;
  limit: number;
  leaseMs: number;
  busyProjects: readonly number[];
  /** The tenancy's condition on a project id column (src/access/tenancy/quiet.ts). */
  claimable: (projectId: string) => string;
}

/**
 * Leases up to `limit` pending event rows, oldest first (`SKIP LOCKED`: each goes to one relay; a
 * relay that dies loses its lease and another takes them again): those owing one of `owing`, or
 * with `owing` null the rows not fanned out yet.
 */
export async function leaseEventRows(db: Executor, lease: EventLease): Promise<LeasedEventRow[]> {
  if (lease.limit <= 0) return [];
  const which = lease.owing === null ? 'owed_to IS NULL' : 'owed_to IS NOT NULL AND owed_to && :servable::bigint[]';
  const { rows } = await db.raw<{ rows: Array<{ id: number; project_id: number; owed_to: string[] | null; events: number }> }>(
    `UPDATE outbox SET locked_until = now() + make_interval(secs => :leaseS)
      WHERE id IN (
        SELECT id FROM outbox
         WHERE kind = 'event' AND status = 'pending' AND ${which} AND (locked_until IS NULL OR locked_until < now())
           AND project_id <> ALL(:busy::bigint[])
           AND ${lease.claimable('outbox.project_id')}
         ORDER BY id LIMIT :n FOR UPDATE SKIP LOCKED)
      RETURNING id, project_id, owed_to, coalesce(event_count, json_array_length(payload::json)) AS events`,
    {
      ...(lease.owing === null ? {} : { servable: pgArray([...lease.owing]) }),
      leaseS: lease.leaseMs / 1000,
      busy: pgArray([...lease.busyProjects]),
      n: lease.limit,
    },
  );
  // bigint[] comes back as text.
  return rows.map((r) => ({ ...r, owed_to: r.owed_to === null ? null : r.owed_to.map(Number) }));
}

/**
 * SQL: the events of the event rows whose ids are in `ids` (a bigint[] parameter), one row each
 * (`recorded`, `project_id`, `ord` from 1, `event_id`, `type`, `body`: the element's text
 * verbatim); for a statement that composes it (a MATERIALIZED CTE splits each row's JSON once).
 */
export const eventsOfRows = (ids: string): string =>
  `SELECT o.id AS recorded, o.project_id, x.ord::int AS ord, x.envelope->>'id' AS event_id, x.envelope->>'type' AS type, x.envelope::text AS body
         FROM outbox o CROSS JOIN LATERAL json_array_elements(o.payload::json) WITH ORDINALITY AS x(envelope, ord)
        WHERE o.id = ANY(${ids})`;

/**
 * Gives each delivery of an event row that did not succeed at once a row of its own (retries, the
 * failed list and manual retries work on those), in one statement, so each event row's JSON is
 * split once; `deliveries` is one JSON array text of objects with the fields of the recordset
 * below. Wakes the relays on commit.
 */
export async function insertEventDeliveries(tx: Executor, recordedIds: readonly number[], deliveries: string): Promise<void> {
  await tx.raw(
    // MATERIALIZED: each recorded row's JSON is split once, whatever join the planner picks
    // (an inner side re-evaluated per delivery parsed a 1,000-item row thousands of times).
    `WITH e AS MATERIALIZED (
       SELECT o.id AS recorded, o.project_id, array_agg(x.envelope->>'type' ORDER BY x.ord) AS types, array_agg(x.envelope::text ORDER BY x.ord) AS bodies
         FROM outbox o CROSS JOIN LATERAL json_array_elements(o.payload::json) WITH ORDINALITY AS x(envelope, ord)
        WHERE o.id = ANY(?::bigint[])
        GROUP BY o.id, o.project_id)
     INSERT INTO outbox (project_id, kind, delivery_kind, subscription_id, event, event_id, url, payload, message_id, destination,
                         status, attempts, next_attempt_at, last_status, last_error, last_response_body, last_attempt_at)
     SELECT e.project_id, 'delivery', 'subscription', r.subscription_id, e.types[r.ord], r.event_id, r.url, e.bodies[r.ord], r.message_id, r.destination,
            r.status, r.attempts,
            CASE WHEN r.retry_ms IS NULL THEN NULL ELSE now() + r.retry_ms * interval '1 millisecond' END,
            r.last_status, r.last_error, r.last_response_body, CASE WHEN r.attempts > 0 THEN now() END
       FROM json_to_recordset(?::json)
         AS r(recorded bigint, ord int, subscription_id bigint, event_id text, url text, message_id text, destination text, status text,
              attempts int, retry_ms bigint, last_status int, last_error text, last_response_body text)
       JOIN e ON e.recorded = r.recorded
     ON CONFLICT DO NOTHING`,
    [pgArray([...recordedIds]), deliveries],
  );
  await notifyOutbox(tx);
}

/** Ends the lease of fanned-out event rows: done, or still pending for the subscriptions each owes (`owed` not empty). */
export async function settleEventRows(tx: Executor, rows: ReadonlyArray<{ id: number; owed: readonly number[] | null }>): Promise<void> {
  await tx.raw(
    `UPDATE outbox o SET status = CASE WHEN u.owed IS NULL THEN 'done' ELSE 'pending' END, owed_to = u.owed, locked_until = NULL
       FROM json_to_recordset(?::json) AS u(id bigint, owed bigint[]) WHERE o.id = u.id`,
    [JSON.stringify(rows)],
  );
}
