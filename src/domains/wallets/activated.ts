import type { Executor } from '../../platform/db/knex.js';
import { findProjectWallet, type WalletRow } from './repository.js';
import { setRecent } from '../../platform/runtime/recent.js';

/** An activated wallet: its key and address exist. */
export type ActiveWallet = WalletRow & { address: string };

/**
 * Activated wallets by id, kept by each API process. A wallet's row changes once, when its key is
 * created (activation sets its address); after that nothing updates or deletes it, so a kept row
 * is never stale: a signature by a customer's backend then reads no wallet from the database.
 * Whether the caller may reach the wallet's project is decided by the tenant scope every time,
 * never by this cache. Bounded: the least recently used go first.
 */
export class ActivatedWallets {
  readonly #rows = new Map<number, ActiveWallet>();

  constructor(private readonly max = 20_000) {}

  /** The activated wallet `walletId` of `projectId`, or undefined (none, another project's, or still pending). */
  async find(db: Executor, projectId: number, walletId: number): Promise<ActiveWallet | undefined> {
    const kept = this.#rows.get(walletId);
    if (kept) {
      setRecent(this.#rows, walletId, kept, this.max);
      return kept.project_id === projectId ? kept : undefined;
    }
    const row = await findProjectWallet(db, projectId, walletId);
    if (!row || row.address === null) return undefined;
    const active = { ...row, address: row.address };
    setRecent(this.#rows, walletId, active, this.max);
    return active;
  }

  get size(): number {
    return this.#rows.size;
  }
}
