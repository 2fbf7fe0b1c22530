import type { EventDefinition } from '../webhooks/catalogue.js';

const DATA =
  'the transaction as `GET` answers it, and `sequence`: its place among the events of the transaction (1, 2, …; receivers may order by it, and the service delivers them in that order per subscription)';

/** The events of a sent transaction (docs/transactions.md): one per change of its status, and a re-pricing or a reorg. */
export const TRANSACTION_EVENTS = [
  { name: 'wallet.transaction.queued', description: 'A send was accepted; it waits for its nonce and fees.', data: DATA },
  { name: 'wallet.transaction.signed', description: 'A send was signed at its nonce; its bytes are recorded before they are broadcast.', data: DATA },
  { name: 'wallet.transaction.submitted', description: 'The node took the signed transaction.', data: DATA },
  { name: 'wallet.transaction.repriced', description: 'A stuck transaction was replaced by one with higher fees (same nonce, new hash).', data: DATA },
  { name: 'wallet.transaction.mined', description: 'A receipt was seen in a block of the canonical chain.', data: DATA },
  {
    name: 'wallet.transaction.reorged',
    description: 'The block of a mined transaction left the canonical chain: it is submitted again, with the same bytes.',
    data: DATA,
  },
  { name: 'wallet.transaction.confirmed', description: "The transaction's block is the chain's confirmation depth deep.", data: DATA },
  {
    name: 'wallet.transaction.failed',
    description: 'The transaction reverted (with its receipt), or could not be sent (the policy, the gas estimate, the node refused it).',
    data: DATA,
  },
  { name: 'wallet.transaction.replaced', description: 'Another transaction took its nonce.', data: DATA },
  {
    name: 'wallet.transaction.cancelled',
    description: 'A cancel (a no-op at its nonce) was mined in its place, or it was cancelled before it was signed.',
    data: DATA,
  },
  { name: 'wallet.transaction.expired', description: 'It waited for fees under the cap longer than the chain allows and was never signed.', data: DATA },
] as const satisfies readonly EventDefinition[];
