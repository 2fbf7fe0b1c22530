import type { Executor } from '../db/knex.js';
import type { Page } from '../http/pagination.js';
import type { OrganisationScope } from '../tenancy/scope.js';
import { listAudit, type AuditRow } from './repository.js';

/** The organisation's audit log, oldest first. */
export async function auditOf(db: Executor, scope: OrganisationScope, page: Page): Promise<AuditRow[]> {
  return listAudit(db, scope.organisationId, page);
}
