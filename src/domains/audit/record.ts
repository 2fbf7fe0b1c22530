import type { Executor } from '../../platform/db/knex.js';
import type { AuditRow } from './repository.js';

/**
 * Writes one audit entry in the caller's transaction: the request's (domains/audit/middleware.ts) or what
 * a command audits itself (a key it created), like domains/webhooks/record.ts for events.
 */
export async function recordAudit(tx: Executor, entry: Omit<AuditRow, 'id' | 'at'>): Promise<void> {
  await auditInsert(tx, entry);
}

/** The entry's insert, for a caller that composes it with other statements into one. */
export const auditInsert = (db: Executor, entry: Omit<AuditRow, 'id' | 'at'>) => db('audit_log').insert({ ...entry, details: JSON.stringify(entry.details) });

/** An entry's columns but its id and time. */
export const AUDIT_COLUMNS = ['organisation_id', 'project_id', 'actor', 'action', 'target', 'status', 'request_id', 'details'] as const satisfies ReadonlyArray<
  keyof AuditRow
>;

/** SQL inserting one entry per row of `source` (a table or CTE with AUDIT_COLUMNS), for a statement that composes it. */
export const auditInsertFrom = (source: string): string =>
  `INSERT INTO audit_log (${AUDIT_COLUMNS.join(', ')}) SELECT ${AUDIT_COLUMNS.join(', ')} FROM ${source}`;
