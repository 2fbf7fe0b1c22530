import type { Static } from '@sinclair/typebox';
import type { SubscriptionOut } from './schemas.js';
import type { SubscriptionRow } from './repository.js';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** The subscription record of docs/interface.md section 8; the secret is never part of it. */
export const presentSubscription = (s: SubscriptionRow): Static<typeof SubscriptionOut> => ({
  id: s.id,
  projectId: s.project_id,
  url: s.url,
  events: s.events,
  createdAt: s.created_at.toISOString(),
  updatedAt: s.updated_at.toISOString(),
  deletedAt: iso(s.deleted_at),
  disabledAt: iso(s.disabled_at),
  disabledReason: s.disabled_reason,
});
