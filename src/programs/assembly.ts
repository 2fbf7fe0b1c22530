import { freshenStatistics } from '../platform/db/statistics.js';
import type Koa from 'koa';
import type { Knex } from 'knex';
import { buildApp } from './app.js';
import { systemClock, type Clock } from '../platform/runtime/clock.js';
import type { Config } from '../platform/config/config.js';
import type { AppState } from '../platform/http/context.js';
import type { Lifecycle } from '../platform/runtime/lifecycle.js';
import type { Logger } from '../platform/logging/logger.js';
import { startProjectKeyCache, type ProjectKeyCache } from '../access/tenancy/key-cache.js';
import { PgRateLimitStore, RedisRateLimitStore, type RateLimitStore } from '../platform/ratelimit/limiter.js';
import type { SignerClient } from '../platform/signer/client.js';
import type { CarryOver } from '../platform/signer/carry-over.js';
import { startCarryOver } from './carry-over.js';
import { SecretBox } from '../platform/crypto/secrets.js';
import { DOMAINS } from '../domains/index.js';
import type { WorkDeps } from '../domains/domain.js';
import { deleteExpiredKeys } from '../platform/idempotency/repository.js';
import { pruneOutbox } from '../platform/outbox/prune.js';
import { OutboxRegistry } from '../platform/outbox/registry.js';
import { OutboxRelay } from '../platform/outbox/relay.js';
import type { PeriodicTask, TaskRole } from '../platform/runtime/scheduler.js';
import { tenantActive } from '../access/tenancy/quiet.js';
import { bindDbPool, bindOutbox, bindSignerHealth } from '../platform/logging/metrics.js';
import { outboxGauges } from '../platform/outbox/repository.js';
import { poolState } from '../platform/db/knex.js';

/** The API process's parts, wired one way for `main.ts` and for the tests (which exercise this wiring). */
export interface ApiParts {
  app: Koa<AppState>;
  lifecycle: Lifecycle;
  rateLimitStore: RateLimitStore;
  projectCache: ProjectKeyCache | undefined;
  /** The carry-over of what the signer kept under numeric project ids (src/platform/signer/carry-over.ts). */
  carryOver: CarryOver;
  /** The API's periodic tasks, for the process's scheduler (src/platform/runtime/scheduler.ts). */
  tasks: PeriodicTask[];
  /** Waits for the work requests started beside them (domains' drain), then stops what the parts started (the cache's LISTEN, the rate-limit store's connections, the carry-over). */
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
  bindMetricSources(db, input.signer);
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
  const now = input.now ?? systemClock;
  const work: WorkDeps = { config, db, signer: input.signer, log, now, secretBox: new SecretBox(input.dataEncryptionKey, config.dataDecryptionKeys) };
  return {
    app,
    lifecycle,
    rateLimitStore,
    projectCache,
    carryOver,
    tasks: periodicTasks(['api'], { ...work, rateLimitStore }),
    close: async () => {
      // Work the requests started that goes on after their answers (a queue's turn) ends first, within the shutdown timeout.
      for (const domain of DOMAINS) await domain.drain?.(work, config.shutdownTimeoutMs);
      await carryOver.stop();
      await projectCache?.stop();
      await rateLimitStore.close();
    },
  };
}

/**
 * What this process's gauges read at scrape time (platform/logging/metrics.ts): the signer's
 * health, the outbox, the database pool. The API and the worker bind the same sources.
 */
function bindMetricSources(db: Knex, signer: SignerClient): void {
  bindSignerHealth(() => signer.health());
  bindOutbox(() => outboxGauges(db, tenantActive));
  bindDbPool(() => poolState(db));
}

/** The outbox's work, declared by the domains' manifests: the relay itself knows none of it. */
export function outboxRegistry(deps: WorkDeps): OutboxRegistry {
  const registry = new OutboxRegistry();
  for (const domain of DOMAINS) {
    const jobs = domain.jobs?.(deps);
    for (const kind of jobs?.kinds ?? []) registry.register(kind);
    for (const feeder of jobs?.feeders ?? []) registry.feed(feeder);
  }
  return registry;
}

/** The platform's own periodic work, beside the domains'. */
function platformTasks(deps: WorkDeps & { rateLimitStore?: RateLimitStore }): PeriodicTask[] {
  const { config, db } = deps;
  const tasks: PeriodicTask[] = [
    // Done outbox rows are history; kept OUTBOX_RETENTION_DAYS, then deleted in batches.
    {
      name: 'outbox-prune',
      role: 'worker',
      everyMs: 600_000,
      run: () => (config.outboxRetentionDays > 0 ? pruneOutbox(db, config.outboxRetentionDays) : Promise.resolve(0)),
    },
    { name: 'idempotency-cleanup', role: 'api', everyMs: 600_000, run: () => deleteExpiredKeys(db) },
    // Young tables' statistics, where autovacuum has not caught up with their growth (prepared statements' plans depend on them).
    { name: 'db-statistics', role: 'worker', everyMs: config.schedulerIntervalMs, run: () => freshenStatistics(db) },
  ];
  const store = deps.rateLimitStore;
  if (store) {
    tasks.push({
      name: 'rate-limit-prune',
      role: 'api',
      everyMs: 600_000,
      run: () => store.prune(Math.floor(deps.now() / 1000) - 2 * config.rateLimitWindowS),
    });
  }
  return tasks;
}

/** Every periodic task of the given roles: the domains' (from their manifests) and the platform's. */
export function periodicTasks(roles: readonly TaskRole[], deps: WorkDeps & { rateLimitStore?: RateLimitStore }): PeriodicTask[] {
  const all = [...DOMAINS.flatMap((d) => d.periodic?.(deps) ?? []), ...platformTasks(deps)];
  return all.filter((t) => roles.includes(t.role));
}

/** The background work of ROLE=worker (and ROLE=all, or the API with RELAY_IN_API). */
export interface BackgroundParts {
  relay: OutboxRelay;
  /** The worker's periodic tasks, for the process's scheduler (src/platform/runtime/scheduler.ts). */
  tasks: PeriodicTask[];
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** The outbox relay (creates wallets queued by createasync, delivers webhooks) and the worker's periodic tasks, wired one way for `main.ts` and for the tests. */
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
  const work: WorkDeps = { config, db, signer: input.signer, log, now, secretBox: new SecretBox(input.dataEncryptionKey, config.dataDecryptionKeys) };
  bindMetricSources(db, input.signer);
  const relay = new OutboxRelay({
    db,
    databaseUrl: input.databaseUrl,
    registry: outboxRegistry(work),
    log,
    concurrency: config.relayConcurrency,
    projectConcurrency: config.relayProjectConcurrency,
    hostConcurrency: config.webhookHostConcurrency,
    pollMs: config.relayPollMs,
    leaseMs: config.relayLeaseMs,
    claimable: tenantActive,
    now,
  });
  return {
    relay,
    tasks: periodicTasks(['worker'], work),
    start: () => relay.start(),
    stop: () => relay.stop(),
  };
}
