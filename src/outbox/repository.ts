import { createHash, randomUUID } from 'node:crypto';
import { pgArray, type Executor, type Knex } from '../db/knex.js';
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

/** One delivery of a recorded event to one subscription, before it has a row of its own. */
export interface EventDelivery {
  /** The recorded outbox row holding the event. */
  recordedId: number;
  projectId: number;
  eventId: string;
  type: string;
  /** The event's stored bytes (its element of the recorded array, verbatim). */
  body: string;
  subscriptionId: number;
  /** Derived from (event, subscription): a re-send after a crash carries the same `webhook-id`. */
  messageId: string;
}

export const deliveryMessageId = (eventId: string, subscriptionId: number): string =>
  `msg_${createHash('sha256').update(`${eventId}:${subscriptionId}`).digest('hex').slice(0, 32)}`;

/**
 * Leases up to `limit` recorded event rows (`SKIP LOCKED`: each goes to one relay; a relay that
 * dies loses its lease and another takes them again) and returns their deliveries: one per
 * (event, active subscription of its project that names it, or `*`), with the subscriptions.
 */
/**
 * A soft-deleted organisation goes quiet: its projects' outbox rows (deliveries, retries, fan-out,
 * wallet creation) are not taken while it is deleted, and are taken as they fell due once it is
 * undeleted (nothing is lost: they stay pending). One condition for every claim.
 */
// NOT IN over an uncorrelated list: PostgreSQL hashes the (usually empty) list of quiet projects
// once per claim instead of probing projects and organisations for every candidate row.
export const ORGANISATION_ACTIVE = `outbox.project_id NOT IN (SELECT qp.id FROM projects qp JOIN organisations qo ON qo.id = qp.organisation_id
                 WHERE qo.deleted_at IS NOT NULL)`;

export async function claimEvents(
  db: Executor,
  limit: number,
  leaseMs: number,
): Promise<{ recorded: number[]; deliveries: EventDelivery[]; subscriptions: Map<number, SubscriptionRow> }> {
  const { rows: claimed } = await db.raw<{ rows: Array<{ id: number }> }>(
    `UPDATE outbox SET locked_until = now() + make_interval(secs => ?)
      WHERE id IN (
        SELECT id FROM outbox
         WHERE kind = 'event' AND status = 'pending' AND (locked_until IS NULL OR locked_until < now())
           AND ${ORGANISATION_ACTIVE}
         ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED)
      RETURNING id`,
    [leaseMs / 1000, limit],
  );
  const recorded = claimed.map((r) => r.id).sort((a, b) => a - b);
  if (recorded.length === 0) return { recorded, deliveries: [], subscriptions: new Map() };
  const { rows } = await db.raw<{
    rows: Array<{ recorded: number; project_id: number; event_id: string; type: string; body: string; subscription_id: number }>;
  }>(
    `SELECT o.id AS recorded, o.project_id, e.envelope->>'id' AS event_id, e.envelope->>'type' AS type, e.envelope::text AS body, s.id AS subscription_id
       FROM outbox o
       CROSS JOIN LATERAL json_array_elements(o.payload::json) WITH ORDINALITY AS e(envelope, ord)
       JOIN webhook_subscriptions s
         ON s.project_id = o.project_id AND s.deleted_at IS NULL AND s.disabled_at IS NULL
        AND (s.events @> ARRAY[e.envelope->>'type'] OR s.events @> ARRAY['*'])
      WHERE o.id = ANY(?::bigint[])
      ORDER BY o.id, e.ord, s.id`,
    [pgArray(recorded)],
  );
  const ids = [...new Set(rows.map((r) => r.subscription_id))];
  const subs = ids.length === 0 ? [] : await db<SubscriptionRow>('webhook_subscriptions').whereIn('id', ids);
  return {
    recorded,
    deliveries: rows.map((r) => ({
      recordedId: r.recorded,
      projectId: r.project_id,
      eventId: r.event_id,
      type: r.type,
      body: r.body,
      subscriptionId: r.subscription_id,
      messageId: deliveryMessageId(r.event_id, r.subscription_id),
    })),
    subscriptions: new Map(subs.map((s) => [s.id, s])),
  };
}

/**
 * Ends leased recorded rows: their deliveries that did not succeed at once (or were not tried in
 * time) get rows of their own, which retries, the failed list and manual retries work on; the
 * recorded rows are marked done. One transaction.
 */
export async function finishEvents(
  db: Knex,
  recorded: readonly number[],
  rest: ReadonlyArray<{ delivery: EventDelivery; url: string; outcome: Outcome | undefined }>,
): Promise<void> {
  await db.transaction(async (tx) => {
    if (rest.length > 0) {
      const col = <T extends string | number | boolean | null>(f: (r: (typeof rest)[number]) => T) => pgArray(rest.map(f));
      await tx.raw(
        `INSERT INTO outbox (project_id, kind, delivery_kind, subscription_id, event, event_id, url, payload, message_id,
                             status, attempts, next_attempt_at, last_status, last_error, last_response_body, last_attempt_at)
         SELECT r.project_id, 'delivery', 'subscription', r.subscription_id, r.type, r.event_id, r.url, r.body, r.message_id,
                r.status, r.attempts,
                CASE WHEN r.retry_ms IS NULL THEN NULL ELSE now() + r.retry_ms * interval '1 millisecond' END,
                r.last_status, r.last_error, r.last_response_body, CASE WHEN r.attempts > 0 THEN now() END
           FROM unnest(?::bigint[], ?::bigint[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::int[], ?::bigint[], ?::int[], ?::text[], ?::text[])
             AS r(project_id, subscription_id, type, event_id, url, body, message_id, status, attempts, retry_ms, last_status, last_error, last_response_body)
         ON CONFLICT DO NOTHING`,
        [
          col((r) => r.delivery.projectId),
          col((r) => r.delivery.subscriptionId),
          col((r) => r.delivery.type),
          col((r) => r.delivery.eventId),
          col((r) => r.outcome?.url ?? r.url),
          col((r) => r.delivery.body),
          col((r) => r.delivery.messageId),
          col((r) => r.outcome?.status ?? 'pending'),
          col((r) => (r.outcome?.attempted ? 1 : 0)),
          col((r) => (r.outcome ? (r.outcome.retryInMs === null ? null : Math.round(r.outcome.retryInMs)) : 0)),
          col((r) => r.outcome?.lastStatus ?? null),
          col((r) => r.outcome?.lastError ?? null),
          col((r) => r.outcome?.lastResponseBody ?? null),
        ],
      );
      await notifyOutbox(tx);
    }
    await tx.raw(`UPDATE outbox SET status = 'done', locked_until = NULL WHERE id = ANY(?::bigint[])`, [pgArray([...recorded])]);
  });
}

/**
 * The endpoint a row's attempts go to, for per-endpoint concurrency: its subscription, or (as a
 * negative number) its project's wallet webhook; null for work that is not a delivery.
 */
export const laneOf = (row: Pick<OutboxRow, 'kind' | 'subscription_id' | 'project_id'>): number | null =>
  row.kind === 'delivery' ? (row.subscription_id ?? -row.project_id) : null;

/**
 * Takes up to `limit` due rows for this relay (recorded `event` rows go through `claimEvents`):
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
             AND ${ORGANISATION_ACTIVE}
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
