import type { EventDefinition } from '../webhooks/catalogue.js';

/** The events the wallet lifecycle records. */
export const WALLET_EVENTS = [
  { name: 'wallet.created', description: 'A wallet was created.', data: 'the wallet-created payload { walletId, walletAddress, emailAddress, token? }' },
] as const satisfies readonly EventDefinition[];
