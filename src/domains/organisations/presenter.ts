import type { Static } from '@sinclair/typebox';
import type { OrganisationOut } from './schemas.js';
import type { OrganisationRow } from './repository.js';

export const presentOrganisation = (o: OrganisationRow): Static<typeof OrganisationOut> => ({
  id: o.id,
  name: o.name,
  createdAt: o.created_at.toISOString(),
  updatedAt: o.updated_at.toISOString(),
  deletedAt: o.deleted_at ? o.deleted_at.toISOString() : null,
});
