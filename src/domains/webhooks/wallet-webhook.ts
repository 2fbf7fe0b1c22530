import type { Executor } from '../../platform/db/knex.js';
import { enqueue, resendFailedWalletDeliveries } from '../../platform/outbox/repository.js';
import { hostOf } from './deliver.js';

/** The wallet-created webhook of the interface document, queued in the transaction that activates the wallet. */
export async function queueWalletWebhook(tx: Executor, wallet: { projectId: number; walletId: number; url: string; payload: string }): Promise<void> {
  await enqueue(tx, {
    project_id: wallet.projectId,
    kind: 'delivery',
    delivery_kind: 'wallet',
    wallet_id: wallet.walletId,
    event: 'wallet.created',
    url: wallet.url,
    payload: wallet.payload,
    destination: hostOf(wallet.url) ?? null,
  });
}

/** The next sign-in re-sends every failed wallet delivery of that wallet at once; the relays wake on commit. */
export async function resendFailedWalletWebhooks(db: Executor, walletId: number): Promise<number> {
  return resendFailedWalletDeliveries(db, walletId);
}
