import { randomUUID } from 'node:crypto';
import { pgArray, type Executor } from '../db/knex.js';
import type { SubscriptionRow } from '../webhooks/repository.js';

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
  Partial<Pick<OutboxRow, 'delivery_kind' | 'wallet_id' | 'subscription_id' | 'event' | 'event_id' | 'url' | 'payload'>>;

/** Queues one row (unless a unique rule says it is already queued: then undefined) and wakes the relays on commit. */
export async function enqueue(db: Executor, row: NewOutboxRow): Promise<OutboxRow | undefined> {
  const { rows } = await db.raw<{ rows: OutboxRow[] }>(
    `INSERT INTO outbox (project_id, kind, delivery_kind, wallet_id, subscription_id, event, event_id, url, payload, message_id)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING *`,
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
    ],
  );
  await notifyOutbox(db);
  return rows[0];
}

/**
 * Fans recorded events out to the subscriptions of their project that name them (or `*`): one
 * delivery row per event and subscription, carrying the event's stored bytes (each element of the
 * recorded array, verbatim) and a `webhook-id` of its own; the recorded rows are marked done in
 * the same statement. SKIP LOCKED lets relays side by side share the work; each event fans out once.
 */
export async function fanOutEvents(db: Executor, limit: number): Promise<{ events: number; deliveries: number }> {
  const { rows } = await db.raw<{ rows: Array<{ events: number; deliveries: number }> }>(
    `WITH ev AS (
       SELECT id, project_id, payload FROM outbox
        WHERE kind = 'event' AND status = 'pending'
        ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED
     ), items AS (
       SELECT ev.id AS recorded, ev.project_id, e.ord, e.envelope, e.envelope->>'type' AS type
         FROM ev CROSS JOIN LATERAL json_array_elements(ev.payload::json) WITH ORDINALITY AS e(envelope, ord)
     ), deliveries AS (
       INSERT INTO outbox (project_id, kind, delivery_kind, subscription_id, event, event_id, url, payload, message_id)
       SELECT i.project_id, 'delivery', 'subscription', s.id, i.type, i.envelope->>'id', s.url, i.envelope::text,
              'msg_' || replace(gen_random_uuid()::text, '-', '')
         FROM items i JOIN webhook_subscriptions s
           ON s.project_id = i.project_id AND s.deleted_at IS NULL AND s.disabled_at IS NULL
          AND (s.events @> ARRAY[i.type] OR s.events @> ARRAY['*'])
        ORDER BY i.recorded, i.ord, s.id
       RETURNING 1
     ), done AS (
       UPDATE outbox SET status = 'done' FROM ev WHERE outbox.id = ev.id RETURNING 1
     )
     SELECT (SELECT count(*) FROM done)::int AS events, (SELECT count(*) FROM deliveries)::int AS deliveries`,
    [limit],
  );
  const result = rows[0] ?? { events: 0, deliveries: 0 };
  if (result.deliveries > 0) await notifyOutbox(db);
  return result;
}

/**
 * The endpoint a row's attempts go to, for per-endpoint concurrency: its subscription, or (as a
 * negative number) its project's wallet webhook; null for work that is not a delivery.
 */
export const laneOf = (row: Pick<OutboxRow, 'kind' | 'subscription_id' | 'project_id'>): number | null =>
  row.kind === 'delivery' ? (row.subscription_id ?? -row.project_id) : null;

/**
 * Takes up to `limit` due rows for this relay (`event` rows are fanned out by `fanOutEvents`):
 * SKIP LOCKED so relays side by side never take the same row, and a lease so that a row whose
 * relay died is taken again once the lease runs out. Deliveries to `busyLanes` (endpoints that
 * have all the attempts in flight they may have) are left for later.
 */
export async function claimDue(db: Executor, limit: number, leaseMs: number, busyLanes: readonly number[] = []): Promise<ClaimedRow[]> {
  const { rows } = await db.raw<{ rows: Array<OutboxRow & { subscription: Record<string, unknown> | null }> }>(
    `WITH claimed AS (
       UPDATE outbox SET locked_until = now() + make_interval(secs => ?)
        WHERE id IN (
          SELECT id FROM outbox
           WHERE status IN ('pending', 'failed') AND next_attempt_at <= now() AND kind <> 'event'
             AND (locked_until IS NULL OR locked_until < now())
             AND (kind <> 'delivery' OR coalesce(subscription_id, -project_id) <> ALL(?::bigint[]))
           ORDER BY next_attempt_at, id
           LIMIT ? FOR UPDATE SKIP LOCKED)
        RETURNING *
     )
     SELECT c.*, row_to_json(s) AS subscription
       FROM claimed c LEFT JOIN webhook_subscriptions s ON s.id = c.subscription_id
      ORDER BY c.id`,
    [leaseMs / 1000, pgArray([...busyLanes]), limit],
  );
  // The subscription comes along with its delivery (one query instead of one more per attempt).
  return rows.map(({ subscription, ...row }) => ({ ...row, subscription: subscription ? subscriptionFromJson(subscription) : null }));
}

/** A delivery as claimed: for subscription deliveries, the subscription as it was at the claim. */
export type ClaimedRow = OutboxRow & { subscription?: SubscriptionRow | null };

const dateOrNull = (v: unknown): Date | null => (typeof v === 'string' ? new Date(v) : null);

function subscriptionFromJson(j: Record<string, unknown>): SubscriptionRow {
  return {
    id: Number(j['id']),
    project_id: Number(j['project_id']),
    url: String(j['url']),
    events: j['events'] as string[],
    secret_enc: String(j['secret_enc']),
    secret_prev_enc: (j['secret_prev_enc'] as string | null) ?? null,
    secret_prev_expires_at: dateOrNull(j['secret_prev_expires_at']),
    created_at: new Date(String(j['created_at'])),
    updated_at: new Date(String(j['updated_at'])),
    deleted_at: dateOrNull(j['deleted_at']),
    disabled_at: dateOrNull(j['disabled_at']),
    disabled_reason: (j['disabled_reason'] as string | null) ?? null,
    failing_since: dateOrNull(j['failing_since']),
  };
}

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

/** The next sign-in re-sends every failed wallet delivery of that wallet at once (interface document). */
export async function resendFailedWalletDeliveries(db: Executor, walletId: number): Promise<number> {
  const { rowCount } = await db.raw<{ rowCount: number }>(
    `UPDATE outbox SET status = 'pending', next_attempt_at = now(), locked_until = NULL
      WHERE wallet_id = ? AND kind = 'delivery' AND delivery_kind = 'wallet' AND status = 'failed'`,
    [walletId],
  );
  if (rowCount > 0) await notifyOutbox(db);
  return rowCount;
}

export async function listFailedDeliveries(db: Executor, projectId: number, page: { afterId: number; limit: number }): Promise<OutboxRow[]> {
  return db<OutboxRow>('outbox')
    .where({ project_id: projectId, kind: 'delivery', status: 'failed' })
    .where('id', '>', page.afterId)
    .orderBy('id')
    .limit(page.limit + 1);
}
