import type { WalletRow } from './repository.js';

export const presentWallet = (w: WalletRow) => ({
  walletId: w.id,
  walletAddress: w.address,
  emailAddress: w.email,
  createdAt: w.created_at.toISOString(),
});
