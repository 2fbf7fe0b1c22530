import type { Static } from '@sinclair/typebox';
import type { TokenOut } from './schemas.js';
import type { ApiTokenRow } from './repository.js';

export const presentToken = (t: ApiTokenRow): Static<typeof TokenOut> => ({
  id: t.id,
  name: t.name,
  role: t.role,
  scope: t.project_id === null ? ('organisation' as const) : ('project' as const),
  organisationId: t.organisation_id,
  projectId: t.project_id,
  createdAt: t.created_at.toISOString(),
  revokedAt: t.revoked_at ? t.revoked_at.toISOString() : null,
});
