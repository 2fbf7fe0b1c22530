import { likeLiteral, pgArray, type Executor } from '../../platform/db/knex.js';
import type { ChainEntry, Checkpoint, SealedEntry } from './chain.js';
import type { Page } from '../../platform/http/pagination.js';

export interface AuditRow {
  id: number;
  at: Date;
  organisation_id: number | null;
  project_id: number | null;
  actor: string;
  action: string;
  target: string | null;
  status: number | null;
  request_id: string | null;
  details: Record<string, unknown>;
}

/** What a reader of the log narrows it to: an actor, an action (its beginning), a target, a time range. */
export interface AuditFilter {
  actor?: string | undefined;
  action?: string | undefined;
  target?: string | undefined;
  from?: Date | undefined;
  to?: Date | undefined;
}

export async function listAudit(db: Executor, organisationId: number, page: Page, filter: AuditFilter = {}): Promise<AuditRow[]> {
  const q = db<AuditRow>('audit_log').where('organisation_id', organisationId).where('id', '>', page.afterId);
  if (filter.actor !== undefined) q.where('actor', filter.actor);
  if (filter.action !== undefined) q.whereLike('action', `${likeLiteral(filter.action)}%`);
  if (filter.target !== undefined) q.where('target', filter.target);
  if (filter.from !== undefined) q.where('at', '>=', filter.from);
  if (filter.to !== undefined) q.where('at', '<', filter.to);
  return await q.orderBy('id').limit(page.limit + 1);
}

/** The sequence number after which the organisation's last `rows` sealed rows begin (0: all of them). */
export async function recentSealedStart(db: Executor, organisationId: number, rows: number): Promise<number> {
  const { rows: found } = await db.raw<{ rows: Array<{ seq: number }> }>(
    'SELECT seq FROM audit_chain WHERE organisation_id = ? ORDER BY seq DESC OFFSET ? LIMIT 1',
    [organisationId, rows],
  );
  return found[0]?.seq ?? 0;
}

/** A row's columns as the chain reads them (of `a`, audit_log): `at` as text to the microsecond in UTC (a JavaScript Date keeps milliseconds only). */
const ENTRY_COLUMNS = `a.id, to_char(a.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at, a.organisation_id, a.project_id, a.actor, a.action, a.target, a.status, a.request_id, a.details`;

/** An audit row as ENTRY_COLUMNS read it. */
export interface EntryRow {
  id: number;
  at: string;
  organisation_id: number | null;
  project_id: number | null;
  actor: string;
  action: string;
  target: string | null;
  status: number | null;
  request_id: string | null;
  details: unknown;
}

/** A row read with ENTRY_COLUMNS as the chain entry at `seq`. */
export const entryOf = (r: EntryRow, seq: number): ChainEntry => ({
  seq,
  id: r.id,
  at: r.at,
  organisationId: r.organisation_id,
  projectId: r.project_id,
  actor: r.actor,
  action: r.action,
  target: r.target,
  status: r.status,
  requestId: r.request_id,
  details: r.details,
});

/** The chain's last entry, if any. */
export async function chainHead(db: Executor): Promise<{ seq: number; hash: Buffer } | undefined> {
  const { rows } = await db.raw<{ rows: Array<{ seq: number; hash: Buffer }> }>('SELECT seq, hash FROM audit_chain ORDER BY seq DESC LIMIT 1');
  return rows[0];
}

/**
 * The sealer's floor (every committed audit row of a transaction with a lower id is sealed:
 * docs/audit.md), and an upper bound, the xmax of this statement's snapshot. Both bounds as
 * constants make the planner read the xid index even before audit_log has statistics (a range
 * of two constants is estimated at 0.5% of the table; one bound alone at a third, which made it
 * scan the whole table and hash the whole chain at each pass).
 */
export async function sealerBounds(db: Executor): Promise<{ floor: string; upper: string }> {
  const { rows } = await db.raw<{ rows: Array<{ floor: string; upper: string }> }>(
    'SELECT xid_floor::text AS floor, pg_snapshot_xmax(pg_current_snapshot())::text AS upper FROM audit_chain_state',
  );
  const bounds = rows[0];
  if (bounds === undefined) throw new Error('audit_chain_state has no row (migrations/20261127010000_audit_chain_insert_only.ts makes it)');
  return bounds;
}

/**
 * Up to `limit` committed rows not sealed yet, by id (the sealer numbers them in this order): those
 * of transactions from the floor up to the bound, or (to go on through a backlog) those after an
 * id. One statement, so one snapshot: `horizon` is that snapshot's xmin (every transaction below it
 * had ended, so its committed rows are visible to the same snapshot).
 */
export async function unsealedRows(
  db: Executor,
  from: { floor: string; upper: string } | { afterId: number },
  limit: number,
): Promise<{ horizon: string; rows: Array<Omit<ChainEntry, 'seq'>> }> {
  // Each form has one index to read: audit_log_xid between the bounds, or the primary key in id order.
  const [where, values] = 'floor' in from ? ['a.xid >= ?::xid8 AND a.xid < ?::xid8', [from.floor, from.upper]] : ['a.id > ?', [from.afterId]];
  const { rows } = await db.raw<{ rows: Array<{ horizon: string } & ({ id: null } | EntryRow)> }>(
    `SELECT h.horizon::text AS horizon, p.* FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS horizon) h
       LEFT JOIN LATERAL (
         SELECT ${ENTRY_COLUMNS} FROM audit_log a
          WHERE ${where} AND NOT EXISTS (SELECT 1 FROM audit_chain c WHERE c.audit_id = a.id)
          ORDER BY a.id LIMIT ?
       ) p ON true
      ORDER BY p.id`,
    [...values, limit],
  );
  const horizon = rows[0]?.horizon;
  if (horizon === undefined) throw new Error('no snapshot horizon');
  return { horizon, rows: rows.flatMap((r) => (r.id === null ? [] : [entryOf(r, 0)])) };
}

/** Gives rows their place in the chain, in one statement; nothing is ever updated there. */
export async function insertChain(
  db: Executor,
  sealed: ReadonlyArray<{ id: number; organisationId: number | null; seq: number; prevHash: Buffer; hash: Buffer }>,
): Promise<void> {
  if (sealed.length === 0) return;
  await db.raw(
    `INSERT INTO audit_chain (seq, audit_id, organisation_id, prev_hash, hash)
     SELECT * FROM unnest(?::bigint[], ?::bigint[], ?::bigint[], ?::bytea[], ?::bytea[])`,
    [sealed.map((s) => s.seq), sealed.map((s) => s.id), pgArray(sealed.map((s) => s.organisationId)), sealed.map((s) => s.prevHash), sealed.map((s) => s.hash)],
  );
}

/**
 * Raises the floor to the lower of `horizon` and `upper` (a pass looked at no row from `upper` on),
 * never lowers it; a pass that finds it there writes nothing.
 */
export async function raiseFloor(db: Executor, horizon: string, upper: string): Promise<void> {
  await db.raw('UPDATE audit_chain_state SET xid_floor = LEAST(?::xid8, ?::xid8) WHERE xid_floor < LEAST(?::xid8, ?::xid8)', [horizon, upper, horizon, upper]);
}

/** Committed rows of audit_log not sealed yet, of one organisation or of all (the benchmark waits for none). */
export async function unsealedCount(db: Executor, organisationId?: number): Promise<number> {
  const { rows } = await db.raw<{ rows: Array<{ n: number }> }>(
    `SELECT count(*)::int AS n FROM audit_log a
      WHERE a.xid >= (SELECT xid_floor FROM audit_chain_state) AND NOT EXISTS (SELECT 1 FROM audit_chain c WHERE c.audit_id = a.id)
      ${organisationId === undefined ? '' : 'AND a.organisation_id = ?'}`,
    organisationId === undefined ? [] : [organisationId],
  );
  return rows[0]?.n ?? 0;
}

type CheckpointRow = { size: number; head: Buffer; at: Date; jws: string };
const checkpointOf = (r: CheckpointRow): Checkpoint => ({ size: r.size, head: r.head.toString('hex'), time: r.at.toISOString(), jws: r.jws });

/**
 * The newest `limit` checkpoints whose head is one of the organisation's rows after `after`: the
 * ones a verification of those rows can hold them against (a checkpoint of another tenant's row
 * proves nothing about these, and there may be hundreds of thousands of them).
 */
export async function checkpointsAtRows(db: Executor, organisationId: number, after: number, limit: number): Promise<Checkpoint[]> {
  const { rows } = await db.raw<{ rows: CheckpointRow[] }>(
    `SELECT k.size, k.head, k.at, k.jws FROM audit_checkpoints k
      WHERE k.size IN (SELECT c.seq FROM audit_chain c WHERE c.organisation_id = ? AND c.seq > ?)
      ORDER BY k.size DESC LIMIT ?`,
    [organisationId, after, limit],
  );
  return rows.reverse().map(checkpointOf);
}

type SealedRow = EntryRow & { seq: number; prev_hash: Buffer; hash: Buffer };
const sealedOf = (r: SealedRow): SealedEntry => ({ ...entryOf(r, r.seq), prevHash: r.prev_hash.toString('hex'), hash: r.hash.toString('hex') });

/**
 * Sealed rows after `after` in chain order: every organisation's, or one's (the chain's copy of the
 * organisation finds them, the row's own must name it too: a changed copy can hide a row, never show another's).
 */
export async function sealedRows(db: Executor, opts: { organisationId?: number | undefined; after: number; limit: number }): Promise<SealedEntry[]> {
  const org = opts.organisationId === undefined ? '' : 'AND c.organisation_id = ? AND a.organisation_id = ?';
  const { rows } = await db.raw<{ rows: SealedRow[] }>(
    `SELECT c.seq, c.prev_hash, c.hash, ${ENTRY_COLUMNS} FROM audit_chain c JOIN audit_log a ON a.id = c.audit_id
      WHERE c.seq > ? ${org} ORDER BY c.seq LIMIT ?`,
    opts.organisationId === undefined ? [opts.after, opts.limit] : [opts.after, opts.organisationId, opts.organisationId, opts.limit],
  );
  return rows.map(sealedOf);
}

/** A chain entry as verification reads it: its row (none when the audit row is gone), and whether its copy of the organisation is the row's. */
export interface StoredEntry {
  seq: number;
  auditId: number;
  entry: SealedEntry | undefined;
  filed: boolean;
}

/** Chain entries after `after` in order, each with its audit row if there still is one. */
export async function chainEntries(db: Executor, after: number, limit: number): Promise<StoredEntry[]> {
  const { rows } = await db.raw<{ rows: Array<SealedRow & { audit_id: number; present: boolean; filed: boolean }> }>(
    `SELECT c.seq, c.audit_id, c.prev_hash, c.hash, a.id IS NOT NULL AS present, c.organisation_id IS NOT DISTINCT FROM a.organisation_id AS filed, ${ENTRY_COLUMNS}
       FROM audit_chain c LEFT JOIN audit_log a ON a.id = c.audit_id
      WHERE c.seq > ? ORDER BY c.seq LIMIT ?`,
    [after, limit],
  );
  return rows.map((r) => ({ seq: r.seq, auditId: r.audit_id, entry: r.present ? sealedOf(r) : undefined, filed: r.filed }));
}

/**
 * The lowest id of a committed audit row below the floor that has no place in the chain: there is
 * none unless its chain entry was deleted or the row was written behind the sealer (its xid set low).
 */
export async function unchainedRow(db: Executor): Promise<number | undefined> {
  const { rows } = await db.raw<{ rows: Array<{ id: number | null }> }>(
    `SELECT min(a.id) AS id FROM audit_log a
      WHERE a.xid < (SELECT xid_floor FROM audit_chain_state) AND NOT EXISTS (SELECT 1 FROM audit_chain c WHERE c.audit_id = a.id)`,
  );
  return rows[0]?.id ?? undefined;
}

/** Checkpoints of more than `after` rows, smallest first. */
export async function listCheckpoints(db: Executor, after = 0): Promise<Checkpoint[]> {
  const rows = await db('audit_checkpoints').where('size', '>', after).orderBy('size').select<CheckpointRow[]>('size', 'head', 'at', 'jws');
  return rows.map(checkpointOf);
}

/** The newest checkpoint: how many rows it covers and when it was signed. */
export async function lastCheckpoint(db: Executor): Promise<{ size: number; at: Date } | undefined> {
  return await db('audit_checkpoints').orderBy('size', 'desc').first<{ size: number; at: Date } | undefined>('size', 'at');
}

export async function lastCheckpointSize(db: Executor): Promise<number> {
  const row = await db('audit_checkpoints').max<{ max: number | null }>('size as max').first();
  return row?.max ?? 0;
}

export async function insertCheckpoint(db: Executor, c: { size: number; head: Buffer; at: Date; kid: string; jws: string }): Promise<void> {
  await db('audit_checkpoints').insert(c).onConflict('size').ignore();
}
