import type { Executor } from '../db/knex.js';

export interface IdempotencyRow {
  principal: string;
  key: string;
  fingerprint: string;
  response_status: number | null;
  response_content_type: string | null;
  response_body: string | null;
  expired: boolean;
}

/** Makes sure a row exists for (principal, key), committed on its own so that others can see it. */
export async function reserveKey(db: Executor, principal: string, key: string, fingerprint: string, ttlS: number): Promise<void> {
  await db.raw(
    `INSERT INTO idempotency_keys (principal, key, fingerprint, expires_at)
     VALUES (?, ?, ?, now() + make_interval(secs => ?))
     ON CONFLICT (principal, key) DO NOTHING`,
    [principal, key, fingerprint, ttlS],
  );
}

/**
 * Locks the row for this request's transaction. NOWAIT: while another request holds it, that
 * request is still running (PostgreSQL error 55P03), which the caller answers with 409.
 */
export async function lockKey(tx: Executor, principal: string, key: string): Promise<IdempotencyRow | undefined> {
  const { rows } = await tx.raw<{ rows: IdempotencyRow[] }>(
    `SELECT principal, key, fingerprint, response_status, response_content_type, response_body, expires_at <= now() AS expired
       FROM idempotency_keys WHERE principal = ? AND key = ? FOR UPDATE NOWAIT`,
    [principal, key],
  );
  return rows[0];
}

/** An expired row starts over for the new request. */
export async function restartKey(tx: Executor, principal: string, key: string, fingerprint: string, ttlS: number): Promise<void> {
  await tx.raw(
    `UPDATE idempotency_keys SET fingerprint = ?, response_status = NULL, response_content_type = NULL, response_body = NULL,
            created_at = now(), expires_at = now() + make_interval(secs => ?)
      WHERE principal = ? AND key = ?`,
    [fingerprint, ttlS, principal, key],
  );
}

export async function storeResponse(
  tx: Executor,
  principal: string,
  key: string,
  response: { status: number; contentType: string; body: string },
): Promise<void> {
  await tx('idempotency_keys')
    .where({ principal, key })
    .update({ response_status: response.status, response_content_type: response.contentType, response_body: response.body });
}

export async function deleteExpiredKeys(db: Executor, batch = 1000): Promise<number> {
  const { rowCount } = await db.raw<{ rowCount: number }>(
    `DELETE FROM idempotency_keys WHERE ctid IN (SELECT ctid FROM idempotency_keys WHERE expires_at < now() LIMIT ?)`,
    [batch],
  );
  return rowCount;
}
