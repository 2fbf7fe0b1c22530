import { pgArray, type Executor, type Knex } from '../../platform/db/knex.js';
import type { Page } from '../../platform/http/pagination.js';
import { tenantActive } from '../../access/tenancy/quiet.js';

export interface MembershipRow {
  id: number;
  project_id: number;
  membership_type: string;
  wallet_address: string;
  wallet_lower: string;
  expiration: number;
  transferable: boolean;
  holds_slot: boolean | null;
  issued_at: Date;
  updated_at: Date;
  revoked_at: Date | null;
  expired_notified_at: Date | null;
}

export type TransactionType = 'mint' | 'update' | 'transfer' | 'burn' | 'delete';

export interface TransactionRow {
  id: number;
  project_id: number;
  type: TransactionType;
  token_id: number;
  membership_type: string;
  from_address: string | null;
  to_address: string | null;
  created_at: Date;
}

export interface Place {
  walletLower: string;
  membershipType: string;
}

/**
 * The ids of the current holders of a list of places (bindings: wallets, types, project): one
 * probe per place by wallet, whatever the size of the table or the age of its statistics. The
 * type is compared outside the lateral subquery, which `OFFSET 0` keeps from being merged or
 * given that condition: with it inside, the planner could probe the by-type index instead and
 * read every membership of the type for each place (a 1,000-item issue of one type into a
 * project of 8,000 took 1.5 s before its statistics caught up; test/domains/memberships/plans.test.ts).
 * A wallet holds one place per type, so a probe reads only that wallet's active memberships.
 */
const HOLDER_IDS = `SELECT h.id FROM unnest(?::text[], ?::text[]) AS p(wallet_lower, membership_type)
  CROSS JOIN LATERAL (SELECT m.id, m.membership_type FROM memberships m
                       WHERE m.project_id = ? AND m.holds_slot AND m.wallet_lower = p.wallet_lower OFFSET 0) AS h
  WHERE h.membership_type = p.membership_type`;

const placeArrays = (places: readonly Place[]) => [pgArray(places.map((p) => p.walletLower)), pgArray(places.map((p) => p.membershipType))];

/** The holders of these places, locked until the transaction ends (bindings: wallets, types, project). */
export const LOCK_HOLDERS_SQL = `SELECT * FROM memberships WHERE id = ANY(ARRAY(${HOLDER_IDS})) FOR UPDATE`;

/**
 * Locks the holders of these places and returns the active ones. Expired memberships keep their
 * place until someone needs it: those among the holders (expired by `nowS`) give it up here, so a
 * new one can be issued. One pass of probes for both (they were two statements of a probe per
 * place each).
 */
export async function lockHolders(db: Executor, projectId: number, places: readonly Place[], nowS: number): Promise<MembershipRow[]> {
  const { rows } = await db.raw<{ rows: MembershipRow[] }>(LOCK_HOLDERS_SQL, [...placeArrays(places), projectId]);
  const expired = (m: MembershipRow) => m.expiration > 0 && m.expiration <= nowS;
  const freed = rows.filter(expired).map((m) => m.id);
  if (freed.length > 0) await db.raw('UPDATE memberships SET holds_slot = NULL WHERE id = ANY(?::bigint[])', [pgArray(freed)]);
  return rows.filter((m) => !expired(m));
}

export interface NewMembership {
  membershipType: string;
  walletAddress: string;
  expiration: number;
  transferable: boolean;
}

/** Inserts what does not collide with an active holder; a collision (a concurrent issue) is left out of the result. */
export async function insertMemberships(db: Executor, projectId: number, items: readonly NewMembership[]): Promise<MembershipRow[]> {
  const { rows } = await db.raw<{ rows: MembershipRow[] }>(
    `INSERT INTO memberships (project_id, membership_type, wallet_address, wallet_lower, expiration, transferable, holds_slot)
     SELECT ?, i.type, i.address, lower(i.address), i.expiration, i.transferable, true
       FROM unnest(?::text[], ?::text[], ?::bigint[], ?::boolean[]) AS i(type, address, expiration, transferable)
     ON CONFLICT (project_id, wallet_lower, membership_type) WHERE holds_slot DO NOTHING
     RETURNING *`,
    [
      projectId,
      pgArray(items.map((i) => i.membershipType)),
      pgArray(items.map((i) => i.walletAddress)),
      pgArray(items.map((i) => i.expiration)),
      pgArray(items.map((i) => i.transferable)),
    ],
  );
  return rows;
}

/** Override: new expiration and transferability, same tokenId (section 7). */
export async function overrideMemberships(
  db: Executor,
  updates: ReadonlyArray<{ id: number; expiration: number; transferable: boolean }>,
): Promise<MembershipRow[]> {
  if (updates.length === 0) return [];
  const { rows } = await db.raw<{ rows: MembershipRow[] }>(
    `UPDATE memberships m
        SET expiration = u.expiration, transferable = u.transferable, updated_at = now(), expired_notified_at = NULL
       FROM unnest(?::bigint[], ?::bigint[], ?::boolean[]) AS u(id, expiration, transferable)
      WHERE m.id = u.id
      RETURNING m.*`,
    [pgArray(updates.map((u) => u.id)), pgArray(updates.map((u) => u.expiration)), pgArray(updates.map((u) => u.transferable))],
  );
  return rows;
}

export async function lockMembership(db: Executor, projectId: number, id: number): Promise<MembershipRow | undefined> {
  return db<MembershipRow>('memberships').where({ project_id: projectId, id }).forUpdate().first();
}

export async function revokeMembership(db: Executor, id: number): Promise<MembershipRow> {
  const [row] = await db<MembershipRow>('memberships')
    .where({ id })
    .update({ revoked_at: db.fn.now(), holds_slot: null, updated_at: db.fn.now() } as never)
    .returning('*');
  if (!row) throw new Error('membership vanished while locked');
  return row;
}

export async function deleteMembership(db: Executor, id: number): Promise<void> {
  await db('memberships').where({ id }).delete();
}

export async function moveMembership(db: Executor, id: number, to: string): Promise<MembershipRow> {
  const [row] = await db<MembershipRow>('memberships')
    .where({ id })
    .update({ wallet_address: to, wallet_lower: to.toLowerCase(), updated_at: db.fn.now() } as never)
    .returning('*');
  if (!row) throw new Error('membership vanished while locked');
  return row;
}

export interface NewTransaction {
  type: TransactionType;
  tokenId: number;
  membershipType: string;
  from: string | null;
  to: string | null;
}

/** Appends ledger transactions, returned in the order given. */
export async function appendTransactions(db: Executor, projectId: number, txs: readonly NewTransaction[]): Promise<TransactionRow[]> {
  if (txs.length === 0) return [];
  const { rows } = await db.raw<{ rows: Array<TransactionRow & { ord: number }> }>(
    `WITH input AS (
       SELECT * FROM unnest(?::text[], ?::bigint[], ?::text[], ?::text[], ?::text[]) WITH ORDINALITY AS t(type, token_id, membership_type, from_address, to_address, ord)
     ), inserted AS (
       INSERT INTO membership_transactions (project_id, type, token_id, membership_type, from_address, to_address)
       SELECT ?, type, token_id, membership_type, from_address, to_address FROM input ORDER BY ord
       RETURNING *
     )
     SELECT * FROM inserted ORDER BY id`,
    [
      pgArray(txs.map((t) => t.type)),
      pgArray(txs.map((t) => t.tokenId)),
      pgArray(txs.map((t) => t.membershipType)),
      pgArray(txs.map((t) => t.from)),
      pgArray(txs.map((t) => t.to)),
      projectId,
    ],
  );
  return rows;
}

export interface ViewFilter {
  walletLower?: string | undefined;
  membershipType?: string | undefined;
  includeRevoked: boolean;
  includeExpired: boolean;
}

/** Section 7's view as a query (the benchmark explains this very query): expired is computed from `nowS`, never stored. */
export function viewQuery(db: Executor, projectId: number, filter: ViewFilter, nowS: number, page: Page): Knex.QueryBuilder<MembershipRow> {
  const q = db<MembershipRow>('memberships').where('project_id', projectId).where('id', '>', page.afterId);
  if (filter.walletLower !== undefined) q.where('wallet_lower', filter.walletLower);
  if (filter.membershipType !== undefined) q.where('membership_type', filter.membershipType);
  if (!filter.includeRevoked) q.whereNull('revoked_at');
  // Expired = not revoked and past its expiration; a revoked one counts as revoked, not expired.
  if (!filter.includeExpired) q.whereRaw('(revoked_at IS NOT NULL OR expiration = 0 OR expiration > ?)', [nowS]);
  return q.orderBy('id').limit(page.limit + 1);
}

export async function viewMemberships(db: Executor, projectId: number, filter: ViewFilter, nowS: number, page: Page): Promise<MembershipRow[]> {
  return (await viewQuery(db, projectId, filter, nowS, page)) as MembershipRow[];
}

/**
 * The scheduler's step: marks up to `limit` memberships whose expiration passed by `nowS` and
 * returns them, in the caller's transaction. SKIP LOCKED lets schedulers run side by side; the
 * mark makes each membership come out once.
 */
export async function claimExpired(db: Executor, nowS: number, limit: number): Promise<MembershipRow[]> {
  const { rows } = await db.raw<{ rows: MembershipRow[] }>(
    `UPDATE memberships SET expired_notified_at = now()
      WHERE id IN (
        SELECT id FROM memberships
         WHERE expiration > 0 AND expiration <= ? AND revoked_at IS NULL AND expired_notified_at IS NULL
           -- A soft-deleted organisation goes quiet; its expirations are announced after undelete.
           AND ${tenantActive('memberships.project_id')}
         ORDER BY expiration, id LIMIT ? FOR UPDATE SKIP LOCKED)
      RETURNING *`,
    [nowS, limit],
  );
  return rows;
}
