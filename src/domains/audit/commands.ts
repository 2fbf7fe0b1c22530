import type { Executor } from '../../platform/db/knex.js';
import type { Page } from '../../platform/http/pagination.js';
import type { OrganisationScope } from '../../access/tenancy/scope.js';
import {
  chainEntries,
  checkpointsAtRows,
  lastCheckpoint,
  listAudit,
  listCheckpoints,
  recentSealedStart,
  sealedRows,
  unchainedRow,
  unsealedCount,
  type AuditFilter,
  type AuditRow,
} from './repository.js';
import type { JSONWebKeySet } from 'jose';
import { ChainVerifier, type VerifyReport } from './chain.js';

/** The organisation's audit log, oldest first. */
export async function auditOf(db: Executor, scope: OrganisationScope, page: Page, filter: AuditFilter = {}): Promise<AuditRow[]> {
  return listAudit(db, scope.organisationId, page, filter);
}

/** Rows a verification on request recomputes at most: the organisation's newest (the CLI verifies a whole export). */
export const VERIFY_WINDOW = 10_000;
/** Checkpoint signatures it checks at most: the newest over those rows. */
export const VERIFY_CHECKPOINTS = 20;

export interface RecentVerification extends VerifyReport {
  /** The rows verified are those after this sequence number. */
  after: number;
  lastCheckpoint: { size: number; time: string } | null;
  /** The organisation's rows written but not sealed yet (sealed within a second or so). */
  unsealed: number;
}

/**
 * Recomputes the organisation's newest sealed rows (each row's hash, links where rows are
 * adjacent) and checks the newest checkpoints whose heads are among them against the service's
 * keys: what the console shows as the chain's status, in bounded work (VERIFY_WINDOW rows,
 * VERIFY_CHECKPOINTS signatures). `custody audit verify` checks the whole chain.
 */
export async function verifyRecent(db: Executor, organisationId: number, jwks: JSONWebKeySet, window = VERIFY_WINDOW): Promise<RecentVerification> {
  const after = await recentSealedStart(db, organisationId, window);
  const verifier = new ChainVerifier(false, after);
  if (await verifier.checkpoints(await checkpointsAtRows(db, organisationId, after, VERIFY_CHECKPOINTS), jwks))
    for (const row of await sealedRows(db, { organisationId, after, limit: window })) if (!verifier.push(row)) break;
  const last = await lastCheckpoint(db);
  return {
    ...verifier.finish(),
    after,
    lastCheckpoint: last ? { size: last.size, time: last.at.toISOString() } : null,
    unsealed: await unsealedCount(db, organisationId),
  };
}

/** Rows per read of an export: one query each, in chain order. */
const EXPORT_BATCH = 1_000;

/** An export's first line: what it holds, so a verifier knows whether the rows are the whole chain. */
export interface ExportHeader {
  type: 'export';
  organisationId: number | null;
  after: number;
}

/**
 * An export in NDJSON lines (docs/audit.md): a header, the sealed rows after `after` in chain order
 * (one organisation's, or with `organisationId` null every row), the checkpoints past `after`, and
 * an end line with the last sequence number and whether `limit` cut it short (resume from there).
 */
export async function* exportLines(db: Executor, organisationId: number | null, after: number, limit: number): AsyncGenerator<string> {
  yield `${JSON.stringify({ type: 'export', organisationId, after } satisfies ExportHeader)}\n`;
  let last = after;
  let sent = 0;
  let more = false;
  while (sent < limit) {
    const rows = await sealedRows(db, { organisationId: organisationId ?? undefined, after: last, limit: Math.min(EXPORT_BATCH, limit - sent) });
    yield rows.map((r) => `${JSON.stringify({ type: 'entry', ...r })}\n`).join('');
    sent += rows.length;
    if (rows.length > 0) last = rows[rows.length - 1]?.seq ?? last;
    if (rows.length < EXPORT_BATCH) break;
  }
  if (sent >= limit) more = (await sealedRows(db, { organisationId: organisationId ?? undefined, after: last, limit: 1 })).length > 0;
  // Checkpoints up to the last row sent: the ones a verifier can hold those rows against.
  for (const c of await listCheckpoints(db, after)) if (c.size <= last || !more) yield `${JSON.stringify({ type: 'checkpoint', ...c })}\n`;
  yield `${JSON.stringify({ type: 'end', lastSeq: last, more })}\n`;
}

/**
 * Recomputes the whole chain in the database and checks every checkpoint against `jwks` (custody
 * audit verify): each chain entry with its audit row, then that no audit row the sealer has passed
 * is left out of the chain.
 */
export async function readChain(db: Executor, jwks: JSONWebKeySet, batch = 10_000): Promise<VerifyReport> {
  const verifier = new ChainVerifier(true);
  if (!(await verifier.checkpoints(await listCheckpoints(db), jwks))) return verifier.finish();
  for (let after = 0; ;) {
    const rows = await chainEntries(db, after, batch);
    for (const r of rows) {
      const ok = r.entry === undefined ? verifier.gone(r.seq, r.auditId) : verifier.push(r.entry) && (r.filed || verifier.misfiled(r.seq, r.auditId));
      if (!ok) return verifier.finish();
    }
    if (rows.length < batch) break;
    after = rows[rows.length - 1]?.seq ?? after;
  }
  // A truncation a checkpoint shows is named first (it says which rows).
  const walked = verifier.finish();
  if (!walked.ok) return walked;
  const stray = await unchainedRow(db);
  if (stray !== undefined) verifier.unchained(stray);
  return verifier.finish();
}
