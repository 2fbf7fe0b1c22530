import { systemClock, type Clock } from '../clock.js';
import type { Knex } from 'knex';
import type { Config } from '../config.js';
import { SecretBox } from '../crypto/secrets.js';
import type { Logger } from '../logger.js';
import { AppError, KeyConflictError } from '../errors.js';
import { WarnOncePer } from '../logging/once.js';
import { findProjectById } from '../projects/repository.js';
import type { SignerClient } from '../signer/client.js';
import { completeWallet } from '../wallets/commands.js';
import { findWallet } from '../wallets/repository.js';
import { deliverSubscriptionWebhook, deliverWalletWebhook } from './deliver.js';
import { OutboxRelay, type OutboxHandler } from './relay.js';
import type { Outcome } from './repository.js';

/** Back-off for work that waits on a dependency (the signer, Vault): 1 s doubling to 1 min. */
const backoff = (attempts: number): number => Math.min(60_000, 1_000 * 2 ** attempts);

export function outboxHandler(deps: { db: Knex; signer: SignerClient; secretBox: SecretBox; config: Config; log: Logger; now?: Clock }): OutboxHandler {
  const now = deps.now ?? systemClock;
  const failures = new WarnOncePer(deps.log);
  const delivery = { db: deps.db, config: deps.config, secretBox: deps.secretBox, now, failures };
  return async (row): Promise<Outcome> => {
    switch (row.kind) {
      case 'wallet.create': {
        const wallet = row.wallet_id === null ? undefined : await findWallet(deps.db, row.wallet_id);
        const project = await findProjectById(deps.db, row.project_id);
        if (!wallet || !project) return { status: 'done', retryInMs: null, attempted: false, lastError: 'wallet or project gone' };
        try {
          await completeWallet({ db: deps.db, signer: deps.signer, now }, project, wallet);
          return { status: 'done', retryInMs: null, attempted: true };
        } catch (err) {
          if (err instanceof KeyConflictError)
            deps.log.error(
              { code: err.code, reason: err.reason, err: err.why, walletId: wallet.id },
              'key conflict: a key store shared between deployments or restored',
            );
          const reason = err instanceof AppError ? err.code : 'internal_error';
          return { status: 'pending', retryInMs: backoff(row.attempts), attempted: true, lastError: reason };
        }
      }
      case 'delivery': {
        return row.delivery_kind === 'subscription' ? deliverSubscriptionWebhook(row, delivery) : deliverWalletWebhook(row, delivery);
      }
      case 'event':
        throw new Error('event rows are fanned out, never claimed');
    }
  };
}

/** A relay configured from the service's settings, with the handler above: one place for main.ts and the tests. */
export function relayFromConfig(deps: {
  config: Config;
  db: Knex;
  databaseUrl: string;
  signer: SignerClient;
  dataEncryptionKey: Buffer;
  log: Logger;
  now?: () => number;
}): OutboxRelay {
  const { config, db } = deps;
  return new OutboxRelay({
    db,
    databaseUrl: deps.databaseUrl,
    handle: outboxHandler({
      db,
      signer: deps.signer,
      secretBox: new SecretBox(deps.dataEncryptionKey),
      config,
      log: deps.log,
      ...(deps.now ? { now: deps.now } : {}),
    }),
    log: deps.log,
    concurrency: config.relayConcurrency,
    pollMs: config.relayPollMs,
    leaseMs: config.relayLeaseMs,
    endpointConcurrency: config.webhookEndpointConcurrency,
  });
}
