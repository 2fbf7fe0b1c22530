/**
 * A soft-deleted organisation goes quiet: its projects' outbox rows (deliveries, retries, fan-out,
 * wallet creation) are not taken while it is deleted, and are taken as they fell due once it is
 * undeleted (nothing is lost: they stay pending). The condition every outbox claim adds, on the
 * column that holds the row's (or the group of rows') project id.
 */
// NOT IN over an uncorrelated list: PostgreSQL hashes the (usually empty) list of quiet projects
// once per claim instead of probing projects and organisations for every candidate row.
export const tenantActive = (projectId: string): string =>
  `${projectId} NOT IN (SELECT qp.id FROM projects qp JOIN organisations qo ON qo.id = qp.organisation_id WHERE qo.deleted_at IS NOT NULL)`;
