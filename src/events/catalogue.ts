/** The events of CONTRACT.md section 9: what subscriptions may name, and what `GET /webhooks/events` lists. */
export const EVENT_CATALOGUE = [
  { name: 'wallet.created', description: 'A wallet was created.', data: 'the wallet-created payload { walletId, walletAddress, emailAddress, token? }' },
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
  { name: 'webhook.test', description: 'The test endpoint of a subscription was called.', data: '{}' },
  {
    name: 'wallet.signature.created',
    description: "A wallet signed: the project's policy allowed the operation.",
    data: '{ walletId, walletAddress, method, digest, caller, rule, policyVersion } (never the payload)',
  },
  {
    name: 'wallet.signature.denied',
    description: "The project's policy refused to let a wallet sign.",
    data: '{ walletId, walletAddress, method, digest, caller, rule (null: no rule allows it), policyVersion } (never the payload)',
  },
] as const;

export type EventType = (typeof EVENT_CATALOGUE)[number]['name'];
export const EVENT_TYPES: readonly EventType[] = EVENT_CATALOGUE.map((e) => e.name);
