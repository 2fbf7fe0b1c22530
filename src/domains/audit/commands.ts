import type { Executor } from '../../platform/db/knex.js';
import type { Page } from '../../platform/http/pagination.js';
import type { OrganisationScope } from '../../access/tenancy/scope.js';
import { listAudit, type AuditRow } from './repository.js';

/** The organisation's audit log, oldest first. */
export async function auditOf(db: Executor, scope: OrganisationScope, page: Page): Promise<AuditRow[]> {
  return listAudit(db, scope.organisationId, page);
}
