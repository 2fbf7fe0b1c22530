import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import { pgArray, type Executor } from '../db/knex.js';
import { eventsFannedOut } from '../metrics.js';
import { notifyOutbox, type ClaimedRow, type Outcome } from '../outbox/repository.js';
import type { FedBatch, Feeder } from '../outbox/registry.js';
import { TENANT_ACTIVE } from '../tenancy/quiet.js';
import { hostOf } from './deliver.js';
import type { SubscriptionRow } from './repository.js';

/** One delivery of a recorded event to one subscription, before it has a row of its own. */
interface EventDelivery {
  /** The recorded row holding the event, and the event's place in it (1-based). */
  recordedId: number;
  ord: number;
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
async function claimEvents(
  db: Executor,
  limit: number,
  leaseMs: number,
  busyProjects: readonly number[],
): Promise<{ recorded: number[]; deliveries: EventDelivery[]; subscriptions: Map<number, SubscriptionRow> }> {
  const { rows: claimed } = await db.raw<{ rows: Array<{ id: number }> }>(
    `UPDATE outbox SET locked_until = now() + make_interval(secs => ?)
      WHERE id IN (
        SELECT id FROM outbox
         WHERE kind = 'event' AND status = 'pending' AND (locked_until IS NULL OR locked_until < now())
           AND project_id <> ALL(?::bigint[])
           AND ${TENANT_ACTIVE}
         ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED)
      RETURNING id`,
    [leaseMs / 1000, pgArray([...busyProjects]), limit],
  );
  const recorded = claimed.map((r) => r.id).sort((a, b) => a - b);
  if (recorded.length === 0) return { recorded, deliveries: [], subscriptions: new Map() };
  const { rows } = await db.raw<{
    rows: Array<{ recorded: number; ord: number; project_id: number; event_id: string; type: string; body: string; subscription_id: number }>;
  }>(
    `SELECT o.id AS recorded, e.ord::int AS ord, o.project_id, e.envelope->>'id' AS event_id, e.envelope->>'type' AS type, e.envelope::text AS body, s.id AS subscription_id
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
      ord: r.ord,
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
 * recorded rows are marked done. One transaction. The bodies are not sent back: each is taken
 * again from its recorded row (its element, by place), so a batch of thousands costs little to
 * send and the stored bytes stay exactly the event's.
 */
async function finishEvents(
  db: Knex,
  recorded: readonly number[],
  rest: ReadonlyArray<{ delivery: EventDelivery; url: string; outcome: Outcome | undefined }>,
): Promise<void> {
  await db.transaction(async (tx) => {
    if (rest.length > 0) {
      const col = <T extends string | number | boolean | null>(f: (r: (typeof rest)[number]) => T) => pgArray(rest.map(f));
      await tx.raw(
        `WITH e AS (
           SELECT o.id AS recorded, x.ord::int AS ord, o.project_id, x.envelope->>'type' AS type, x.envelope::text AS body
             FROM outbox o CROSS JOIN LATERAL json_array_elements(o.payload::json) WITH ORDINALITY AS x(envelope, ord)
            WHERE o.id = ANY(?::bigint[]))
         INSERT INTO outbox (project_id, kind, delivery_kind, subscription_id, event, event_id, url, payload, message_id, destination,
                             status, attempts, next_attempt_at, last_status, last_error, last_response_body, last_attempt_at)
         SELECT e.project_id, 'delivery', 'subscription', r.subscription_id, e.type, r.event_id, r.url, e.body, r.message_id, r.destination,
                r.status, r.attempts,
                CASE WHEN r.retry_ms IS NULL THEN NULL ELSE now() + r.retry_ms * interval '1 millisecond' END,
                r.last_status, r.last_error, r.last_response_body, CASE WHEN r.attempts > 0 THEN now() END
           FROM unnest(?::bigint[], ?::int[], ?::bigint[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::int[], ?::bigint[], ?::int[], ?::text[], ?::text[])
             AS r(recorded, ord, subscription_id, event_id, url, message_id, destination, status, attempts, retry_ms, last_status, last_error, last_response_body)
           JOIN e ON e.recorded = r.recorded AND e.ord = r.ord
         ON CONFLICT DO NOTHING`,
        [
          pgArray([...new Set(rest.map((r) => r.delivery.recordedId))]),
          col((r) => r.delivery.recordedId),
          col((r) => r.delivery.ord),
          col((r) => r.delivery.subscriptionId),
          col((r) => r.delivery.eventId),
          col((r) => r.outcome?.url ?? r.url),
          col((r) => r.delivery.messageId),
          col((r) => hostOf(r.outcome?.url ?? r.url) ?? null),
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

/** A delivery of a recorded event as a job of the relay: a row that exists only in memory until it needs one. */
function jobOf(d: EventDelivery, sub: SubscriptionRow | undefined, at: Date): ClaimedRow {
  return {
    id: 0,
    project_id: d.projectId,
    kind: 'delivery',
    delivery_kind: 'subscription',
    wallet_id: null,
    subscription_id: d.subscriptionId,
    event: d.type,
    event_id: d.eventId,
    url: sub?.url ?? null,
    payload: d.body,
    message_id: d.messageId,
    status: 'pending',
    attempts: 0,
    next_attempt_at: null,
    last_status: null,
    last_error: null,
    last_response_body: null,
    last_attempt_at: null,
    manual_retry: false,
    destination: hostOf(sub?.url) ?? null,
    created_at: at,
    context: sub ?? null,
  };
}

/**
 * The fan-out (CONTRACT.md section 9): recorded events become one delivery per subscription
 * naming them, tried at once; only those that do not succeed get rows of their own.
 */
export function eventFanOut(db: Knex, lane: string, now: () => number): Feeder {
  return {
    lane,
    async claim(limit, leaseMs, busyProjects): Promise<FedBatch> {
      const claimed = await claimEvents(db, limit, leaseMs, busyProjects);
      eventsFannedOut.inc({ what: 'events' }, claimed.recorded.length);
      eventsFannedOut.inc({ what: 'deliveries' }, claimed.deliveries.length);
      const at = new Date(now());
      const pairs = claimed.deliveries.map((d) => ({ delivery: d, job: jobOf(d, claimed.subscriptions.get(d.subscriptionId), at) }));
      return {
        leased: claimed.recorded.length,
        jobs: pairs.map((p) => p.job),
        finish: (outcomes) => {
          const rest = pairs
            .map(({ delivery, job }) => ({ delivery, url: job.url ?? '', outcome: outcomes.get(job) }))
            .filter((r) => r.outcome === undefined || r.outcome.status !== 'done');
          return finishEvents(db, claimed.recorded, rest);
        },
      };
    },
  };
}
