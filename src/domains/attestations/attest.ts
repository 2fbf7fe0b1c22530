import type { AttestationClaims } from '../../../contract/index.js';
import type { Executor } from '../../platform/db/knex.js';
import { checksumAddress, ADDRESS_RULE } from '../../platform/eth/address.js';
import { ValidationError } from '../../platform/http/errors.js';
import type { SignerClient } from '../../platform/signer/client.js';
import { activeMembership } from '../memberships/commands.js';
import { presentMembership, type MembershipRecord } from '../memberships/presenter.js';

export interface MembershipCheck {
  active: boolean;
  membership: MembershipRecord | null;
  attestation: string | null;
}

/**
 * Whether `walletAddress` holds an active membership of `membershipType` in the project now, and if
 * so a short-lived attestation of it signed by the service key (docs/audit.md). A revoked, expired
 * or transferred membership is not found (the view's rule): `active: false` and no attestation.
 */
export async function checkMembership(
  deps: { db: Executor; signer: Pick<SignerClient, 'serviceSign'>; issuer: string; ttlS: number },
  projectId: number,
  walletAddress: string,
  membershipType: string,
  nowMs: number,
): Promise<MembershipCheck> {
  const address = checksumAddress(walletAddress);
  if (address === undefined)
    throw new ValidationError('walletAddress is not a valid address.', [{ in: 'query', path: '/walletAddress', message: ADDRESS_RULE }]);
  const nowS = Math.floor(nowMs / 1000);
  const m = await activeMembership(deps.db, projectId, address, membershipType, nowS);
  if (!m) return { active: false, membership: null, attestation: null };
  // Never valid past the membership's own expiration.
  const exp = m.expiration > 0 ? Math.min(nowS + deps.ttlS, m.expiration) : nowS + deps.ttlS;
  const claims: AttestationClaims = {
    iss: deps.issuer,
    sub: m.wallet_address,
    membershipType: m.membership_type,
    tokenId: String(m.id),
    status: 'active',
    projectId: String(projectId),
    iat: nowS,
    exp,
  };
  const attestation = await deps.signer.serviceSign('membership-attestation', { ...claims });
  return { active: true, membership: presentMembership(m, nowS), attestation };
}
