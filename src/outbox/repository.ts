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
export async function claimDue(db: Executor, limit: number, leaseMs: number, busyLanes: readonly number[] = []): Promise<OutboxRow[]> {
  const { rows } = await db.raw<{ rows: OutboxRow[] }>(
    `UPDATE outbox SET locked_until = now() + make_interval(secs => ?)
      WHERE id IN (
        SELECT id FROM outbox
         WHERE status IN ('pending', 'failed') AND next_attempt_at <= now() AND kind <> 'event'
           AND (locked_until IS NULL OR locked_until < now())
           AND (kind <> 'delivery' OR coalesce(subscription_id, -project_id) <> ALL(?::bigint[]))
         ORDER BY next_attempt_at, id
         LIMIT ? FOR UPDATE SKIP LOCKED)
      RETURNING *`,
    [leaseMs / 1000, pgArray([...busyLanes]), limit],
  );
  return rows.sort((a, b) => a.id - b.id);
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

export async function settle(db: Executor, id: number, outcome: Outcome): Promise<void> {
  const values: Record<string, unknown> = {
    status: outcome.status,
    next_attempt_at: outcome.retryInMs === null ? null : db.raw('now() + make_interval(secs => ?)', [outcome.retryInMs / 1000]),
    locked_until: null,
    manual_retry: false,
  };
  if (outcome.attempted) {
    values['attempts'] = db.raw('attempts + 1');
    values['last_attempt_at'] = db.fn.now();
    values['last_status'] = outcome.lastStatus ?? null;
    values['last_error'] = outcome.lastError ?? null;
    values['last_response_body'] = outcome.lastResponseBody ?? null;
  }
  if (outcome.url !== undefined) values['url'] = outcome.url;
  await db('outbox').where({ id }).update(values);
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
