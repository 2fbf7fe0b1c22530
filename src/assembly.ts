import type Koa from 'koa';
import type { Knex } from 'knex';
import { buildApp } from './app.js';
import { systemClock, type Clock } from './clock.js';
import type { Config } from './config.js';
import type { AppState } from './http/context.js';
import type { Lifecycle } from './lifecycle.js';
import type { Logger } from './logger.js';
import { startProjectKeyCache, type ProjectKeyCache } from './tenancy/key-cache.js';
import { PgRateLimitStore, RedisRateLimitStore, type RateLimitStore } from './ratelimit/limiter.js';
import type { SignerClient } from './signer/client.js';
import { startCarryOver, type CarryOver } from './signer/carry-over.js';
import { SecretBox } from './crypto/secrets.js';
import { ExpiryScheduler } from './memberships/expiry-scheduler.js';
import { pruneOutbox } from './outbox/prune.js';
import { pruneSignatures } from './policies/limits.js';
import { OutboxRegistry } from './outbox/registry.js';
import { OutboxRelay } from './outbox/relay.js';
import { tenantActive } from './tenancy/quiet.js';
import { registerWalletJobs } from './wallets/jobs.js';
import { registerWebhookJobs } from './webhooks/jobs.js';

/** The API process's parts, wired one way for `main.ts` and for the tests (which exercise this wiring). */
export interface ApiParts {
  app: Koa<AppState>;
  lifecycle: Lifecycle;
  rateLimitStore: RateLimitStore;
  projectCache: ProjectKeyCache | undefined;
  /** The carry-over of what the signer kept under numeric project ids (src/signer/carry-over.ts). */
  carryOver: CarryOver;
  /** Stops what the parts started (the cache's LISTEN, the rate-limit store's connections, the carry-over). */
  close(): Promise<void>;
}

export function assembleApi(input: {
  config: Config;
  db: Knex;
  /** For the project-key cache's LISTEN connection. */
  databaseUrl: string;
  log: Logger;
  signer: SignerClient;
  operatorTokenHash: Buffer;
  dataEncryptionKey: Buffer;
  now?: Clock;
  version?: string;
}): ApiParts {
  const { config, db, log } = input;
  const lifecycle: Lifecycle = { draining: false };
  const rateLimitStore: RateLimitStore = config.redisUrl ? new RedisRateLimitStore(config.redisUrl, config.redisKeyPrefix) : new PgRateLimitStore(db);
  const projectCache = startProjectKeyCache(config, db, input.databaseUrl, log);
  // Before the app can ask anything: calls about projects wait for the carry-over's documents.
  const carryOver = startCarryOver({ db, signer: input.signer, log });
  input.signer.holdProjectCalls(carryOver.gate);
  const app = buildApp({
    config,
    db,
    log,
    lifecycle,
    signer: input.signer,
    rateLimitStore,
    operatorTokenHash: input.operatorTokenHash,
    dataEncryptionKey: input.dataEncryptionKey,
    ...(projectCache ? { projectCache } : {}),
    ...(input.now ? { now: input.now } : {}),
    ...(input.version ? { version: input.version } : {}),
  });
  return {
    app,
    lifecycle,
    rateLimitStore,
    projectCache,
    carryOver,
    close: async () => {
      await carryOver.stop();
      await projectCache?.stop();
      await rateLimitStore.close();
    },
  };
}

/** The lanes of the outbox: wallet creation and its webhook in one, subscription traffic in the other. */
export const LANES = { wallets: 'wallets', webhooks: 'webhooks' } as const;

/** The outbox's work, registered by the domains that own it: the relay itself knows none of them. */
export function outboxRegistry(deps: { config: Config; db: Knex; signer: SignerClient; dataEncryptionKey: Buffer; log: Logger; now: Clock }): OutboxRegistry {
  const registry = new OutboxRegistry();
  registerWalletJobs(registry, deps, LANES.wallets);
  registerWebhookJobs(registry, { ...deps, secretBox: new SecretBox(deps.dataEncryptionKey) }, { subscriptions: LANES.webhooks, wallet: LANES.wallets });
  return registry;
}

/** The background work of ROLE=worker (and ROLE=all, or the API with RELAY_IN_API). */
export interface BackgroundParts {
  relay: OutboxRelay;
  scheduler: ExpiryScheduler;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The outbox relay (creates wallets queued by createasync, delivers webhooks), the membership
 * expiry scheduler and outbox pruning, wired one way for `main.ts` and for the tests.
 */
export function assembleBackground(input: {
  config: Config;
  db: Knex;
  databaseUrl: string;
  signer: SignerClient;
  dataEncryptionKey: Buffer;
  log: Logger;
  now?: Clock;
}): BackgroundParts {
  const { config, db, log } = input;
  const now = input.now ?? systemClock;
  const relay = new OutboxRelay({
    db,
    databaseUrl: input.databaseUrl,
    registry: outboxRegistry({ ...input, now }),
    log,
    concurrency: config.relayConcurrency,
    projectConcurrency: config.relayProjectConcurrency,
    hostConcurrency: config.webhookHostConcurrency,
    pollMs: config.relayPollMs,
    leaseMs: config.relayLeaseMs,
    claimable: tenantActive,
    now,
  });
  const scheduler = new ExpiryScheduler({ db, log, intervalMs: config.schedulerIntervalMs });
  let pruning: NodeJS.Timeout | undefined;
  return {
    relay,
    scheduler,
    start: async () => {
      await relay.start();
      scheduler.start();
      // Done outbox rows are history; kept OUTBOX_RETENTION_DAYS, then deleted in batches.
      pruning = setInterval(() => {
        if (config.outboxRetentionDays > 0) {
          pruneOutbox(db, config.outboxRetentionDays).catch((err: unknown) => log.warn({ err: String(err) }, 'outbox pruning failed'));
        }
        // Signatures older than the longest limit window count for nothing.
        pruneSignatures(db).catch((err: unknown) => log.warn({ err: String(err) }, 'signature pruning failed'));
      }, 600_000);
      pruning.unref();
    },
    stop: async () => {
      clearInterval(pruning);
      await scheduler.stop();
      await relay.stop();
    },
  };
}
