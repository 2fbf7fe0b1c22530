import type { Static } from '@sinclair/typebox';
import type { WalletOut } from './schemas.js';
import type { WalletRow } from './repository.js';

/** Only active wallets (with an address) are ever shown; the commands never return a pending one. */
export const presentWallet = (w: Pick<WalletRow, 'id' | 'address' | 'email' | 'created_at'>): Static<typeof WalletOut> => {
  if (w.address === null) throw new Error(`wallet ${w.id} has no address yet`);
  return { walletId: w.id, walletAddress: w.address, emailAddress: w.email, createdAt: w.created_at.toISOString() };
};
