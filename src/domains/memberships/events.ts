import type { EventDefinition } from '../webhooks/catalogue.js';

/** The events memberships record: every change, its ledger transaction, and expiry. */
export const MEMBERSHIP_EVENTS = [
  { name: 'membership.issued', description: 'Issue created a membership.', data: 'the membership record' },
  {
    name: 'membership.updated',
    description: 'Any change of a membership: issue, override, revoke, transfer, hard delete, expiry.',
    data: 'the membership record and `change`: issued | overridden | revoked | transferred | deleted | expired',
  },
  { name: 'membership.revoked', description: 'A membership was revoked.', data: 'the membership record' },
  { name: 'membership.transferred', description: 'A membership changed holder.', data: 'the membership record and `from`, `to`' },
  {
    name: 'transaction.created',
    description: 'A ledger transaction was appended.',
    data: '{ transactionId, type: mint | update | transfer | burn | delete, tokenId, membershipType, from, to, createdAt }',
  },
  { name: 'membership.expired', description: 'The scheduler saw an expiration pass.', data: 'the membership record' },
] as const satisfies readonly EventDefinition[];
