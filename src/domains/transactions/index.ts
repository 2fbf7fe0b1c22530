import type { Knex } from 'knex';
import type { Config } from '../../platform/config/config.js';
import { Rotation } from '../../platform/db/rotation.js';
import type { Logger } from '../../platform/logging/logger.js';
import type { Clock } from '../../platform/runtime/clock.js';
import type { SignerClient } from '../../platform/signer/client.js';
import { defineDomain } from '../domain.js';
import { signingServices } from '../signing/services.js';
import { walletDeps } from '../wallets/index.js';
import { Chains } from './chains.js';
import type { TransactionDeps } from './commands.js';
import { TransactionEngine } from './engine.js';
import { TRANSACTION_EVENTS } from './events.js';
import { chainsWithWork, lastQueueWithWork, queuesWithWork, type QueueKey } from './repository.js';
import { transactionEndpoints } from './routes.js';

const built = new WeakMap<object, TransactionDeps>();

/**
 * The process's transaction engine (one per signer client: the API's requests and the worker's
 * passes of one process share its chains' RPC clients, fee answers and URL states).
 */
export function transactionDeps(deps: { db: Knex; signer: SignerClient; now: Clock; log: Logger; config: Config }): TransactionDeps {
  let t = built.get(deps.signer);
  if (!t) {
    const chains = new Chains(deps.config.chains, deps.log, deps.now);
    const engine = new TransactionEngine({
      db: deps.db,
      now: deps.now,
      log: deps.log,
      chains,
      sign: signingServices(deps),
      leaseMs: deps.config.sendLeaseMs,
      settleWindow: deps.config.transactionsSettleWindow,
    });
    t = { db: deps.db, engine, now: deps.now, log: deps.log, sendWaitMs: deps.config.sendWaitMs };
    built.set(deps.signer, t);
  }
  return t;
}

const QUEUES_PARALLEL = 8;

/** The queue turns this process's requests started and that go on after their answers, waited for at shutdown (none if no engine was made). */
async function drainTurns(signer: SignerClient, timeoutMs: number): Promise<void> {
  await built.get(signer)?.engine.drain(timeoutMs);
}

/** Sending transactions on the configured chains: the endpoints, the worker's passes (docs/transactions.md). */
export const transactionsDomain = defineDomain({
  name: 'transactions',
  events: TRANSACTION_EVENTS,
  endpoints: (deps) => transactionEndpoints({ ...deps, transactions: transactionDeps(deps), wallets: walletDeps(deps) }),
  drain: (deps, timeoutMs) => drainTurns(deps.signer, timeoutMs),
  periodic: (deps) => {
    if (deps.config.chains.length === 0) return [];
    const { engine } = transactionDeps(deps);
    const lastSettled = new Map<number, number>();
    const queueRotation = new Rotation<QueueKey>();
    // Every chain's URLs checked at start (eth_chainId must match), by each process that sends.
    const verify = (role: 'api' | 'worker') => ({
      name: `chains-verify-${role}`,
      role,
      everyMs: 3_600_000,
      atStart: true,
      run: () => engine.chains.verify(deps.log),
    });
    return [
      verify('api'),
      verify('worker'),
      {
        // Queues a request could not work (its wait ran out, the signer or the RPC was down, fees were above the cap).
        name: 'transactions-send',
        role: 'worker',
        everyMs: deps.config.transactionsTickMs,
        run: async () => {
          const queues = await queueRotation.next(deps.config.transactionsQueueWindow, {
            read: (range, limit) => queuesWithWork(deps.db, range, limit),
            last: () => lastQueueWithWork(deps.db),
            keyOf: (q) => q,
          });
          let next = 0;
          await Promise.all(
            Array.from({ length: Math.min(QUEUES_PARALLEL, queues.length) }, async () => {
              while (next < queues.length) {
                const q = queues[next++];
                if (q) await engine.drive(q.chain_id, q.from_address);
              }
            }),
          );
          return queues.length;
        },
      },
      {
        // Queued sends past their chain's queuedTtlMs, never signed: `expired`.
        name: 'transactions-expire',
        role: 'worker',
        everyMs: deps.config.transactionsTickMs,
        run: () => engine.expire(),
      },
      {
        // Each chain at most once per its block time: receipts, depth, reorgs, stuck and dropped transactions, gaps.
        name: 'transactions-settle',
        role: 'worker',
        everyMs: deps.config.transactionsTickMs,
        run: async () => {
          const at = deps.now();
          const ids = await chainsWithWork(deps.db);
          let passes = 0;
          for (const id of ids) {
            const chain = engine.chains.get(id);
            if (!chain) continue;
            // Half a tick of slack: ticks come a tick apart, give or take a millisecond, and a
            // strict bound skipped every other one on a chain whose block time is the tick.
            if (at - (lastSettled.get(id) ?? 0) < chain.config.blockTimeMs - deps.config.transactionsTickMs / 2) continue;
            lastSettled.set(id, at);
            await engine.settle(id);
            passes++;
          }
          return passes;
        },
      },
    ];
  },
});
