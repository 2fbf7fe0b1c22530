import { randomUUID } from 'node:crypto';
import type { Executor } from '../db/knex.js';

export const OUTBOX_CHANNEL = 'custody_outbox';

export interface OutboxRow {
  id: number;
  project_id: number;
  kind: 'wallet.create' | 'delivery' | 'event';
  delivery_kind: 'wallet' | 'subscription' | null;
  wallet_id: number | null;
  event: string | null;
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
  created_at: Date;
}

export const newMessageId = (): string => `msg_${randomUUID().replace(/-/g, '')}`;

/** Wakes the relays when the surrounding transaction commits (NOTIFY is transactional). */
export async function notifyOutbox(db: Executor): Promise<void> {
  await db.raw('SELECT pg_notify(?, ?)', [OUTBOX_CHANNEL, '']);
}

export async function enqueue(
  db: Executor,
  row: Pick<OutboxRow, 'project_id' | 'kind'> & Partial<Pick<OutboxRow, 'delivery_kind' | 'wallet_id' | 'event' | 'url' | 'payload'>>,
): Promise<boolean> {
  const { rowCount } = await db.raw<{ rowCount: number }>(
    `INSERT INTO outbox (project_id, kind, delivery_kind, wallet_id, event, url, payload, message_id)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
    [row.project_id, row.kind, row.delivery_kind ?? null, row.wallet_id ?? null, row.event ?? null, row.url ?? null, row.payload ?? null, newMessageId()],
  );
  await notifyOutbox(db);
  return rowCount > 0;
}

/**
 * Takes up to `limit` due rows for this relay (`event` rows wait for the subscriptions' fan-out): SKIP LOCKED so relays side by side never take the
 * same row, and a lease so that a row whose relay died is taken again once the lease runs out.
 */
export async function claimDue(db: Executor, limit: number, leaseMs: number): Promise<OutboxRow[]> {
  const { rows } = await db.raw<{ rows: OutboxRow[] }>(
    `UPDATE outbox SET locked_until = now() + make_interval(secs => ?)
      WHERE id IN (
        SELECT id FROM outbox
         WHERE status IN ('pending', 'failed') AND next_attempt_at <= now() AND kind <> 'event'
           AND (locked_until IS NULL OR locked_until < now())
         ORDER BY next_attempt_at, id
         LIMIT ? FOR UPDATE SKIP LOCKED)
      RETURNING *`,
    [leaseMs / 1000, limit],
  );
  return rows;
}

export interface Outcome {
  status: 'pending' | 'done' | 'failed';
  /** When to try again; null: never by itself. */
  nextAttemptAt: Date | null;
  attempted: boolean;
  lastStatus?: number | null;
  lastError?: string | null;
  lastResponseBody?: string | null;
  url?: string | null;
}

export async function settle(db: Executor, id: number, outcome: Outcome): Promise<void> {
  const values: Record<string, unknown> = {
    status: outcome.status,
    next_attempt_at: outcome.nextAttemptAt,
    locked_until: null,
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
