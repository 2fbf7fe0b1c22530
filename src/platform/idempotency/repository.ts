import type { Executor } from '../db/knex.js';
import type { SealedColumn } from '../crypto/reseal.js';
import { deleteInBatches } from '../db/batches.js';

/** What a stored answer is sealed to: another record's ciphertext does not open here. */
export const recordAad = (principal: string, key: string, fingerprint: string) => `custody:idempotency:v1:${principal}:${fingerprint}:${key}`;

/** Stored answers are sealed (they carry shown-once secrets): re-encrypted on a data-key rotation. */
export const SEALED_ANSWERS: SealedColumn = {
  table: 'idempotency_keys',
  column: 'response_body',
  key: ['principal', 'key'],
  aadColumns: ['fingerprint'],
  aad: (row) => recordAad(String(row['principal']), String(row['key']), String(row['fingerprint'])),
};

/** The request that holds an Idempotency-Key record: its principal, key and fingerprint, and a random owner id. */
export interface Reservation {
  principal: string;
  key: string;
  fingerprint: string;
  owner: string;
}

/** What a request found when it could not claim the record: another request's, running or answered. */
export interface HeldRecord {
  fingerprint: string;
  response_status: number | null;
  response_content_type: string | null;
  response_body: string | null;
}

/**
 * Claims the record of (principal, key) for `r` in one statement, committed on its own: a new
 * key, an answered record past its time to live, or an unanswered one whose lease has run out
 * (its request died; taken over only for the same request, unless expired too). Answers
 * `{ claimed: true }`, or the record as it stands (`undefined` when a concurrent claim committed
 * it after this statement's snapshot: that request is running).
 */
export async function claimKey(
  db: Executor,
  r: Reservation,
  times: { ttlS: number; leaseS: number },
): Promise<{ claimed: true } | { claimed: false; held: HeldRecord | undefined }> {
  const { rows } = await db.raw<{ rows: Array<HeldRecord & { claimed: boolean; found: boolean }> }>(
    `WITH claim AS (
       INSERT INTO idempotency_keys AS k (principal, key, fingerprint, owner, lease_until, expires_at)
       VALUES (:principal, :key, :fingerprint, :owner, now() + make_interval(secs => :leaseS), now() + make_interval(secs => :ttlS))
       ON CONFLICT (principal, key) DO UPDATE
          SET fingerprint = EXCLUDED.fingerprint, owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until,
              expires_at = EXCLUDED.expires_at, created_at = now(),
              response_status = NULL, response_content_type = NULL, response_body = NULL
        WHERE CASE WHEN k.response_status IS NULL
                   THEN k.lease_until <= now() AND (k.fingerprint = EXCLUDED.fingerprint OR k.expires_at <= now())
                   ELSE k.expires_at <= now() END
       RETURNING 1
     )
     SELECT EXISTS (SELECT 1 FROM claim) AS claimed, k.principal IS NOT NULL AS found,
            k.fingerprint, k.response_status, k.response_content_type, k.response_body
       FROM (SELECT 1) one LEFT JOIN idempotency_keys k ON k.principal = :principal AND k.key = :key`,
    { ...r, ttlS: times.ttlS, leaseS: times.leaseS },
  );
  const row = rows[0];
  if (row?.claimed) return { claimed: true };
  return { claimed: false, held: row?.found ? row : undefined };
}

/**
 * Stores the answer of the request that holds the record; false when it no longer does (its lease
 * ran out and another request took the record over). In the change's transaction when there is
 * one (domains/audit/middleware.ts), so that the change and its answer commit together.
 */
export async function storeResponse(db: Executor, r: Reservation, response: { status: number; contentType: string; body: string }): Promise<boolean> {
  const updated = await db('idempotency_keys')
    .where({ principal: r.principal, key: r.key, owner: r.owner })
    .whereNull('response_status')
    .update({ response_status: response.status, response_content_type: response.contentType, response_body: response.body });
  return updated === 1;
}

/** Gives the record up (a 5xx or an error): a retry with the same key runs afresh. */
export async function releaseKey(db: Executor, r: Reservation): Promise<void> {
  await db('idempotency_keys').where({ principal: r.principal, key: r.key, owner: r.owner }).whereNull('response_status').delete();
}

/** Deletes records past their time to live, `batch` at a time until none is left (deleteInBatches); one still running is kept until its lease ends. */
export async function deleteExpiredKeys(db: Executor, batch = 1000): Promise<number> {
  return deleteInBatches(async (n) => {
    const { rowCount } = await db.raw<{ rowCount: number }>(
      `DELETE FROM idempotency_keys WHERE ctid IN (
         SELECT ctid FROM idempotency_keys WHERE expires_at < now() AND (response_status IS NOT NULL OR lease_until < now()) LIMIT ?)`,
      [n],
    );
    return rowCount;
  }, batch);
}
