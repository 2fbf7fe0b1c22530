import type { Executor } from '../../platform/db/knex.js';
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
