import type { Knex } from 'knex';
import type { Clock } from '../../platform/runtime/clock.js';
import { AppError, KeyConflictError } from '../../platform/http/errors.js';
import type { Logger } from '../../platform/logging/logger.js';
import { LANES, type JobKind } from '../../platform/outbox/registry.js';
import type { Outcome } from '../../platform/outbox/repository.js';
import type { SignerClient } from '../../platform/signer/client.js';
import { projectForWork } from '../../access/tenancy/project-key.js';
import { completeWallet } from './commands.js';
import { findWallet } from './repository.js';

/** Back-off for work that waits on a dependency (the signer, Vault): 1 s doubling to 1 min. */
const backoff = (attempts: number): number => Math.min(60_000, 1_000 * 2 ** attempts);

/** `wallet.create` rows (queued by createasync): the key is created by the signer, then the wallet is activated. */
export function walletJobs(deps: { db: Knex; signer: SignerClient; log: Logger; now: Clock }): JobKind[] {
  const create: JobKind = {
    kind: 'wallet.create',
    lane: LANES.wallets,
    async handle(row): Promise<Outcome> {
      const wallet = row.wallet_id === null ? undefined : await findWallet(deps.db, row.wallet_id);
      const project = await projectForWork(deps.db, row.project_id);
      if (!wallet || !project) return { status: 'done', retryInMs: null, attempted: false, lastError: 'wallet or project gone' };
      try {
        await completeWallet(deps, project, wallet);
        return { status: 'done', retryInMs: null, attempted: true };
      } catch (err) {
        if (err instanceof KeyConflictError) {
          deps.log.error(
            { code: err.code, reason: err.reason, err: err.why, walletId: wallet.id },
            'key conflict: a key store shared between deployments or restored',
          );
        }
        const reason = err instanceof AppError ? err.code : 'internal_error';
        return { status: 'pending', retryInMs: backoff(row.attempts), attempted: true, lastError: reason };
      }
    },
  };
  return [create];
}
