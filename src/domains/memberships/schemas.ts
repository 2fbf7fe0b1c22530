import { Type } from '@sinclair/typebox';
import { Id, NullableTimestamp, pageOf, PageQuery, QueryBool, strictObject, Timestamp } from '../../platform/http/schemas.js';
import { component } from '../../platform/openapi/meta.js';

/** Two non-empty parts of `[A-Za-z0-9_.-]`, at most 64 characters each, around one colon (section 7). */
export const MembershipType = Type.String({
  pattern: '^[A-Za-z0-9_.-]{1,64}:[A-Za-z0-9_.-]{1,64}$',
  description: 'two parts of at most 64 characters of [A-Za-z0-9_.-] separated by one colon, e.g. gym:gold',
});

/** Shape only; the EIP-55 rule for mixed case is checked by the handler (it needs keccak-256). */
export const Address = Type.String({ pattern: '^0x[0-9a-fA-F]{40}$', description: 'an EVM address' });

/** A decimal uint256 without leading zeros; the range is checked by the handler. */
export const TokenId = Type.String({ pattern: '^(0|[1-9][0-9]{0,77})$', description: 'a decimal unsigned 256-bit integer' });

/** Unix seconds, 0 = never; at most the last second of year 9999. */
export const MAX_EXPIRATION = 253_402_300_799;
export const Expiration = Type.Integer({ minimum: 0, maximum: MAX_EXPIRATION, description: 'Unix time in seconds; 0 = never expires' });

export const MAX_ISSUE_ITEMS = 1_000;

export const IssueItem = strictObject({
  membershipType: MembershipType,
  walletAddress: Address,
  expiration: Type.Optional(Expiration),
  transferable: Type.Optional(Type.Boolean()),
  override: Type.Optional(Type.Boolean()),
});
export const IssueBody = Type.Array(IssueItem, { minItems: 1, maxItems: MAX_ISSUE_ITEMS });

export const RevokeBody = strictObject({ tokenId: TokenId, hardDelete: Type.Optional(Type.Boolean()) });
export const TransferBody = strictObject({ from: Address, to: Address, tokenId: TokenId });

/** Section 3: a token wider than one project names it here. */
export const ProjectQuery = strictObject({ projectId: Type.Optional(Id) });

export const ViewQuery = strictObject({
  projectId: Type.Optional(Id),
  walletAddress: Type.Optional(Address),
  membershipType: Type.Optional(MembershipType),
  includeRevoked: Type.Optional(QueryBool),
  includeExpired: Type.Optional(QueryBool),
  ...PageQuery,
});

export const MembershipOut = component(
  'Membership',
  Type.Object(
    {
      tokenId: TokenId,
      membershipType: Type.String(),
      walletAddress: Type.String({ pattern: '^0x[0-9a-fA-F]{40}$' }),
      expiration: Type.Integer({ minimum: 0, description: 'Unix seconds; 0 = never' }),
      transferable: Type.Boolean(),
      status: Type.Union([Type.Literal('active'), Type.Literal('revoked'), Type.Literal('expired')]),
      issuedAt: Timestamp,
      updatedAt: Timestamp,
      revokedAt: NullableTimestamp,
    },
    { additionalProperties: false },
  ),
);
export const MembershipList = pageOf('memberships', MembershipOut);
export const IssuedOut = Type.Object({ memberships: Type.Array(MembershipOut) }, { additionalProperties: false });
