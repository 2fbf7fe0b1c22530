import type { Executor } from '../db/knex.js';
import type { AuditRow } from './repository.js';

/**
 * Writes one audit entry in the caller's transaction: the request's (audit/middleware.ts) or what
 * a command audits itself (a key it created), like events/record.ts for events.
 */
export async function recordAudit(tx: Executor, entry: Omit<AuditRow, 'id' | 'at'>): Promise<void> {
  await tx('audit_log').insert({ ...entry, details: JSON.stringify(entry.details) });
}
