import type Koa from 'koa';
import type { Knex } from 'knex';
import { buildApp } from './app.js';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import type { AppState } from './http/context.js';
import type { Lifecycle } from './lifecycle.js';
import type { Logger } from './logger.js';
import { startProjectKeyCache, type ProjectKeyCache } from './tenancy/key-cache.js';
import { PgRateLimitStore, RedisRateLimitStore, type RateLimitStore } from './ratelimit/limiter.js';
import type { SignerClient } from './signer/client.js';

/** The API process's parts, wired one way for `main.ts` and for the tests (which exercise this wiring). */
export interface ApiParts {
  app: Koa<AppState>;
  lifecycle: Lifecycle;
  rateLimitStore: RateLimitStore;
  projectCache: ProjectKeyCache | undefined;
  /** Stops what the parts started (the cache's LISTEN, the rate-limit store's connections). */
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
    close: async () => {
      await projectCache?.stop();
      await rateLimitStore.close();
    },
  };
}
