import { randomUUID } from 'node:crypto';
import { pgArray, type Executor } from '../db/knex.js';

export const OUTBOX_CHANNEL = 'custody_outbox';

export interface OutboxRow {
  id: number;
  project_id: number;
  kind: 'wallet.create' | 'delivery' | 'event';
  delivery_kind: 'wallet' | 'subscription' | null;
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
  await db.raw('SELECT pg_notify(?, ?)', [OUTBOX_CHANNEL, '']);
}

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

/**
 * Takes up to `limit` due rows of the given kinds (a lane's) for this relay, in one statement
 * (recorded `event` rows are fed, not claimed; the index outbox_due_by_kind reads only these
 * kinds' due rows): SKIP LOCKED so relays side by side never take the same row, and a lease so
 * that a row whose relay died is taken again once the lease runs out. Rows of `busyProjects` and
 * `busyHosts` (at their bound in this lane) are left for later; `claimable` is the tenancy's
 * condition on the row.
 */
export async function claimDue(
  db: Executor,
  claim: { kinds: readonly KindKey[]; limit: number; leaseMs: number; busyProjects: readonly number[]; busyHosts: readonly string[]; claimable: string },
): Promise<ClaimedRow[]> {
  const { rows } = await db.raw<{ rows: OutboxRow[] }>(
    `UPDATE outbox SET locked_until = now() + make_interval(secs => ?)
      WHERE id IN (
        SELECT id FROM outbox
         WHERE (kind, coalesce(delivery_kind, '')) IN (SELECT * FROM unnest(?::text[], ?::text[]))
           AND status IN ('pending', 'failed') AND next_attempt_at <= now() AND next_attempt_at IS NOT NULL AND kind <> 'event'
           AND (locked_until IS NULL OR locked_until < now())
           AND project_id <> ALL(?::bigint[])
           AND coalesce(destination, '') <> ALL(?::text[])
           AND ${claim.claimable}
         ORDER BY next_attempt_at, id
         LIMIT ? FOR UPDATE SKIP LOCKED)
      RETURNING *`,
    [
      claim.leaseMs / 1000,
      pgArray(claim.kinds.map((k) => k.kind)),
      pgArray(claim.kinds.map((k) => k.deliveryKind)),
      pgArray([...claim.busyProjects]),
      pgArray([...claim.busyHosts]),
      claim.limit,
    ],
  );
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
