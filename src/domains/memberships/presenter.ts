import type { Static } from '@sinclair/typebox';
import type { MembershipOut } from './schemas.js';
import type { MembershipRow, TransactionRow } from './repository.js';

export type MembershipStatus = 'active' | 'revoked' | 'expired';

/** Section 7: expired = not revoked, `expiration > 0 && expiration <= now`, from the clock alone. */
export function statusOf(m: MembershipRow, nowS: number): MembershipStatus {
  if (m.revoked_at !== null) return 'revoked';
  return m.expiration > 0 && m.expiration <= nowS ? 'expired' : 'active';
}

export const presentMembership = (m: MembershipRow, nowS: number): Static<typeof MembershipOut> => ({
  tokenId: String(m.id),
  membershipType: m.membership_type,
  walletAddress: m.wallet_address,
  expiration: m.expiration,
  transferable: m.transferable,
  status: statusOf(m, nowS),
  issuedAt: m.issued_at.toISOString(),
  updatedAt: m.updated_at.toISOString(),
  revokedAt: m.revoked_at ? m.revoked_at.toISOString() : null,
});

export type MembershipRecord = ReturnType<typeof presentMembership>;

/** The `transaction.created` data of section 9. */
export const presentTransaction = (t: TransactionRow) => ({
  transactionId: String(t.id),
  type: t.type,
  tokenId: String(t.token_id),
  membershipType: t.membership_type,
  from: t.from_address,
  to: t.to_address,
  createdAt: t.created_at.toISOString(),
});
