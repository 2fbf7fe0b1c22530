import type { OrganisationRow } from './repository.js';

export const presentOrganisation = (o: OrganisationRow) => ({
  id: o.id,
  name: o.name,
  createdAt: o.created_at.toISOString(),
  updatedAt: o.updated_at.toISOString(),
  deletedAt: o.deleted_at ? o.deleted_at.toISOString() : null,
});
