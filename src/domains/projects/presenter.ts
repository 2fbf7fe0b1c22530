import type { Static } from '@sinclair/typebox';
import type { ProjectOut } from './schemas.js';
import type { ProjectRow } from './repository.js';
import { tokenClaimOf } from './issuer-binding.js';

export const presentProject = (p: ProjectRow): Static<typeof ProjectOut> => ({
  id: p.id,
  uid: p.uid,
  organisationId: p.organisation_id,
  name: p.name,
  environment: p.environment,
  issuer: p.issuer,
  walletWebhookUrl: p.wallet_webhook_url,
  requireVerifiedEmail: p.require_verified_email,
  tokenClaim: tokenClaimOf(p),
  audience: p.audience,
  createdAt: p.created_at.toISOString(),
  updatedAt: p.updated_at.toISOString(),
  deletedAt: p.deleted_at ? p.deleted_at.toISOString() : null,
});
