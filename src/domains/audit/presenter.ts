import type { AuditRow } from './repository.js';

export const presentAudit = (r: AuditRow) => ({
  id: r.id,
  at: r.at.toISOString(),
  organisationId: r.organisation_id,
  projectId: r.project_id,
  actor: r.actor,
  action: r.action,
  target: r.target,
  status: r.status,
  requestId: r.request_id,
  details: r.details,
});
