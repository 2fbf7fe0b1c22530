import type { Executor } from '../../platform/db/knex.js';
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

export async function listAudit(db: Executor, organisationId: number, page: Page): Promise<AuditRow[]> {
  return await db<AuditRow>('audit_log')
    .where('organisation_id', organisationId)
    .where('id', '>', page.afterId)
    .orderBy('id')
    .limit(page.limit + 1);
}

/** A row's columns as the chain reads them: `at` as text to the microsecond in UTC (a JavaScript Date keeps milliseconds only). */
const ENTRY_COLUMNS = `id, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at, organisation_id, project_id, actor, action, target, status, request_id, details`;

interface EntryRow {
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

const entryOf = (r: EntryRow, seq: number): ChainEntry => ({
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

/** The chain's last sealed row, if any. */
export async function chainHead(db: Executor): Promise<{ seq: number; hash: Buffer } | undefined> {
  const { rows } = await db.raw<{ rows: Array<{ seq: number; hash: Buffer }> }>(
    'SELECT seq, hash FROM audit_log WHERE seq IS NOT NULL ORDER BY seq DESC LIMIT 1',
  );
  return rows[0];
}

/** Up to `limit` committed rows not sealed yet, by id (the sealer numbers them in this order). */
export async function unsealedRows(db: Executor, limit: number): Promise<Array<Omit<ChainEntry, 'seq'>>> {
  const { rows } = await db.raw<{ rows: EntryRow[] }>(`SELECT ${ENTRY_COLUMNS} FROM audit_log WHERE seq IS NULL ORDER BY id LIMIT ?`, [limit]);
  return rows.map((r) => entryOf(r, 0));
}

/** Gives rows their place in the chain, in one statement. */
export async function sealRows(db: Executor, sealed: ReadonlyArray<{ id: number; seq: number; prevHash: Buffer; hash: Buffer }>): Promise<void> {
  if (sealed.length === 0) return;
  await db.raw(
    `UPDATE audit_log a SET seq = v.seq, prev_hash = v.prev, hash = v.hash
       FROM unnest(?::bigint[], ?::bigint[], ?::bytea[], ?::bytea[]) AS v(id, seq, prev, hash)
      WHERE a.id = v.id AND a.seq IS NULL`,
    [sealed.map((s) => s.id), sealed.map((s) => s.seq), sealed.map((s) => s.prevHash), sealed.map((s) => s.hash)],
  );
}

/** Sealed rows after `after` in chain order: every organisation's, or one's. */
export async function sealedRows(db: Executor, opts: { organisationId?: number | undefined; after: number; limit: number }): Promise<SealedEntry[]> {
  const org = opts.organisationId === undefined ? '' : 'AND organisation_id = ?';
  const { rows } = await db.raw<{ rows: Array<EntryRow & { seq: number; prev_hash: Buffer; hash: Buffer }> }>(
    `SELECT seq, prev_hash, hash, ${ENTRY_COLUMNS} FROM audit_log WHERE seq > ? ${org} AND seq IS NOT NULL ORDER BY seq LIMIT ?`,
    opts.organisationId === undefined ? [opts.after, opts.limit] : [opts.after, opts.organisationId, opts.limit],
  );
  return rows.map((r) => ({ ...entryOf(r, r.seq), prevHash: r.prev_hash.toString('hex'), hash: r.hash.toString('hex') }));
}

/** Checkpoints of more than `after` rows, smallest first. */
export async function listCheckpoints(db: Executor, after = 0): Promise<Checkpoint[]> {
  const rows = await db('audit_checkpoints')
    .where('size', '>', after)
    .orderBy('size')
    .select<Array<{ size: number; head: Buffer; at: Date; jws: string }>>('size', 'head', 'at', 'jws');
  return rows.map((r) => ({ size: r.size, head: r.head.toString('hex'), time: r.at.toISOString(), jws: r.jws }));
}

export async function lastCheckpointSize(db: Executor): Promise<number> {
  const row = await db('audit_checkpoints').max<{ max: number | null }>('size as max').first();
  return row?.max ?? 0;
}

export async function insertCheckpoint(db: Executor, c: { size: number; head: Buffer; at: Date; kid: string; jws: string }): Promise<void> {
  await db('audit_checkpoints').insert(c).onConflict('size').ignore();
}
