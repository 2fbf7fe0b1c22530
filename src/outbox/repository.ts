import { randomUUID } from 'node:crypto';
import { pgArray, type Executor, type Knex } from '../db/knex.js';

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

/** Wakes the relays when the surrounding transaction commits (NOTIFY is transactional). */
export async function notifyOutbox(db: Executor): Promise<void> {
  await db.select(outboxNotice(db));
}

/** The relay's wake-up as an expression, for a statement that composes it (see notifyOutbox). */
export const outboxNotice = (db: Executor) => db.raw('pg_notify(?, ?)', [OUTBOX_CHANNEL, '']);

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
  /** The tenancy's condition on a project id column (src/tenancy/quiet.ts). */
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
export async function outboxDepth(db: Executor): Promise<Array<{ kind: string; status: string; n: number }>> {
  const { rows } = await db.raw<{ rows: Array<{ kind: string; status: string; n: number }> }>(
    `SELECT kind, status, count(*)::int AS n FROM outbox WHERE status IN ('pending', 'failed') GROUP BY kind, status`,
  );
  return rows;
}
