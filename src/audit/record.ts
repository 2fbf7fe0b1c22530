import type { Executor } from '../db/knex.js';
import { recordAudit, type AuditRow } from './repository.js';

/** What a command audits itself (a key it created), in the transaction of its change. */
export async function audit(tx: Executor, entry: Omit<AuditRow, 'id' | 'at'>): Promise<void> {
  await recordAudit(tx, entry);
}
