import type { Executor } from '../../platform/db/knex.js';
import type { Page } from '../../platform/http/pagination.js';

export interface SubscriptionRow {
  id: number;
  project_id: number;
  url: string;
  events: string[];
  secret_enc: string;
  secret_prev_enc: string | null;
  secret_prev_expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
  disabled_at: Date | null;
  disabled_reason: string | null;
  failing_since: Date | null;
}

export async function nextSubscriptionId(db: Executor): Promise<number> {
  const { rows } = await db.raw<{ rows: Array<{ id: number }> }>(`SELECT nextval(pg_get_serial_sequence('webhook_subscriptions', 'id')) AS id`);
  const id = rows[0]?.id;
  if (id === undefined) throw new Error('no id from the webhook_subscriptions sequence');
  return id;
}

export async function insertSubscription(
  db: Executor,
  values: Pick<SubscriptionRow, 'id' | 'project_id' | 'url' | 'events' | 'secret_enc'>,
): Promise<SubscriptionRow> {
  const [row] = await db<SubscriptionRow>('webhook_subscriptions').insert(values).returning('*');
  if (!row) throw new Error('insert returned no row');
  return row;
}

export async function findSubscription(
  db: Executor,
  projectId: number,
  id: number,
  options: { includeDeleted?: boolean; forUpdate?: boolean } = {},
): Promise<SubscriptionRow | undefined> {
  const q = db<SubscriptionRow>('webhook_subscriptions').where({ project_id: projectId, id });
  if (!options.includeDeleted) q.whereNull('deleted_at');
  if (options.forUpdate) q.forUpdate();
  return q.first();
}

export async function findSubscriptionById(db: Executor, id: number): Promise<SubscriptionRow | undefined> {
  return db<SubscriptionRow>('webhook_subscriptions').where({ id }).first();
}

export async function listSubscriptions(db: Executor, projectId: number, page: Page, showDeleted: boolean): Promise<SubscriptionRow[]> {
  const q = db<SubscriptionRow>('webhook_subscriptions').where('project_id', projectId).where('id', '>', page.afterId);
  if (!showDeleted) q.whereNull('deleted_at');
  return await q.orderBy('id').limit(page.limit + 1);
}

export async function updateSubscription(db: Executor, id: number, values: Partial<SubscriptionRow>): Promise<SubscriptionRow> {
  const [row] = await db<SubscriptionRow>('webhook_subscriptions')
    .where({ id })
    .update({ ...values, updated_at: db.fn.now() } as never)
    .returning('*');
  if (!row) throw new Error('subscription vanished');
  return row;
}

/** After a successful attempt: the run of failures is over. */
export async function markSubscriptionHealthy(db: Executor, id: number): Promise<void> {
  await db('webhook_subscriptions').where({ id }).whereNotNull('failing_since').update({ failing_since: null });
}

/**
 * After a failed attempt: starts (or continues) the run of failures, and disables the
 * subscription once the run is `disableAfterMs` long. Returns whether it is now disabled.
 */
export async function markSubscriptionFailing(db: Executor, id: number, nowMs: number, disableAfterMs: number): Promise<boolean> {
  const { rows } = await db.raw<{ rows: Array<{ disabled: boolean }> }>(
    `UPDATE webhook_subscriptions
        SET failing_since = coalesce(failing_since, to_timestamp(? / 1000.0)),
            disabled_at = CASE WHEN disabled_at IS NULL AND coalesce(failing_since, to_timestamp(? / 1000.0)) <= to_timestamp(? / 1000.0)
                               THEN now() ELSE disabled_at END,
            disabled_reason = CASE WHEN disabled_at IS NULL AND coalesce(failing_since, to_timestamp(? / 1000.0)) <= to_timestamp(? / 1000.0)
                                   THEN 'every delivery failed for ' || ? || ' days' ELSE disabled_reason END
      WHERE id = ?
      RETURNING disabled_at IS NOT NULL AS disabled`,
    [nowMs, nowMs, nowMs - disableAfterMs, nowMs, nowMs - disableAfterMs, (disableAfterMs / 86_400_000).toFixed(1).replace(/\.0$/, ''), id],
  );
  return rows[0]?.disabled ?? false;
}

export async function disableSubscription(db: Executor, id: number, reason: string): Promise<void> {
  await db('webhook_subscriptions').where({ id }).whereNull('disabled_at').update({ disabled_at: db.fn.now(), disabled_reason: reason });
}

export async function subscriptionsByIds(db: Executor, ids: readonly number[]): Promise<SubscriptionRow[]> {
  return ids.length === 0 ? [] : db<SubscriptionRow>('webhook_subscriptions').whereIn('id', ids);
}

/** Live (not deleted) subscriptions of a project, counted under a lock that serialises creations in it. */
export async function countLiveSubscriptionsLocked(db: Executor, projectId: number): Promise<number> {
  // A hash collision only makes two projects wait for each other a moment.
  await db.raw(`SELECT pg_advisory_xact_lock(hashtext('custody:webhook-subscriptions:' || ?::text))`, [projectId]);
  const row = (await db('webhook_subscriptions').where('project_id', projectId).whereNull('deleted_at').count({ n: '*' }).first()) as
    { n: string | number } | undefined;
  return Number(row?.n ?? 0);
}

/** SQL: whether a live subscription of the project of `row` (an alias with `project_id` and `event`) names its event type, or `*`. */
export const someSubscriptionNames = (row: string): string =>
  `EXISTS (SELECT 1 FROM webhook_subscriptions s
                   WHERE s.project_id = ${row}.project_id AND s.deleted_at IS NULL AND (s.events @> ARRAY[${row}.event] OR s.events @> ARRAY['*']::text[]))`;

/** The newest sequence number of a stream settled for a subscription (0: none yet). */
export async function streamCursor(db: Executor, subscriptionId: number, stream: string): Promise<number> {
  const row = await db('webhook_stream_cursors').where({ subscription_id: subscriptionId, stream }).first<{ settled: number } | undefined>('settled');
  return row?.settled ?? 0;
}

/** Moves a stream's cursor up to `sequence` (never down: a late settle of an older event changes nothing). */
export async function settleStream(db: Executor, subscriptionId: number, stream: string, sequence: number): Promise<void> {
  await db.raw(
    `INSERT INTO webhook_stream_cursors (subscription_id, stream, settled) VALUES (?, ?, ?)
     ON CONFLICT (subscription_id, stream) DO UPDATE SET settled = GREATEST(webhook_stream_cursors.settled, EXCLUDED.settled), updated_at = now()`,
    [subscriptionId, stream, sequence],
  );
}
