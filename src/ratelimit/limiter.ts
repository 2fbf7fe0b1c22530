import { Redis } from 'ioredis';
import type { Knex } from 'knex';
import { AppError } from '../errors.js';
import type { AppContext } from '../http/context.js';
import type { Logger } from '../logger.js';

/** Where hits are counted: PostgreSQL by default, Redis when REDIS_URL is set. */
export interface RateLimitStore {
  /** Counts one hit of `key` in the window starting at `windowStart` (Unix seconds); returns the hits so far. */
  hit(key: string, windowStart: number, windowS: number): Promise<number>;
  /** Drops windows that ended before `before` (Unix seconds); a no-op where keys expire by themselves. */
  prune(before: number): Promise<void>;
  close(): Promise<void>;
}

export class PgRateLimitStore implements RateLimitStore {
  constructor(private readonly db: Knex) {}

  async hit(key: string, windowStart: number): Promise<number> {
    const { rows } = await this.db.raw<{ rows: Array<{ hits: number }> }>(
      `INSERT INTO rate_limits (key, window_start, hits) VALUES (?, ?, 1)
       ON CONFLICT (key, window_start) DO UPDATE SET hits = rate_limits.hits + 1
       RETURNING hits`,
      [key, windowStart],
    );
    return rows[0]?.hits ?? 1;
  }

  async prune(before: number): Promise<void> {
    await this.db('rate_limits').where('window_start', '<', before).delete();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

export class RedisRateLimitStore implements RateLimitStore {
  readonly #redis: Redis;

  /** `prefix` keeps deployments that share one Redis apart. */
  constructor(
    url: string,
    private readonly prefix: string,
  ) {
    // No offline queue and one attempt: a Redis outage must not hold requests up.
    this.#redis = new Redis(url, { lazyConnect: false, enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2_000 });
    this.#redis.on('error', () => undefined);
  }

  async hit(key: string, windowStart: number, windowS: number): Promise<number> {
    const name = `${this.prefix}:rl:${key}:${windowStart}`;
    const results = await this.#redis.multi().incr(name).expire(name, windowS * 2).exec();
    const count = results?.[0]?.[1];
    if (typeof count !== 'number') throw new Error('redis answered no count');
    return count;
  }

  prune(): Promise<void> {
    return Promise.resolve();
  }

  async close(): Promise<void> {
    this.#redis.disconnect();
    return Promise.resolve();
  }
}

export interface RateLimitState {
  limit: number;
  remaining: number;
  resetS: number;
  exceeded: boolean;
}

/**
 * Fixed windows of `windowS` seconds per key. A store that fails lets the request through (and
 * says so in the log): rate limiting must not turn a Redis outage into an API outage.
 */
export class RateLimiter {
  #warned = 0;

  constructor(
    private readonly store: RateLimitStore,
    private readonly windowS: number,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  async check(key: string, limit: number): Promise<RateLimitState | undefined> {
    if (limit <= 0) return undefined;
    const nowS = Math.floor(this.now() / 1000);
    const windowStart = nowS - (nowS % this.windowS);
    let hits: number;
    try {
      hits = await this.store.hit(key, windowStart, this.windowS);
    } catch (err) {
      if (Date.now() - this.#warned > 10_000) {
        this.#warned = Date.now();
        this.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'rate-limit store unavailable; requests are let through');
      }
      return undefined;
    }
    return { limit, remaining: Math.max(0, limit - hits), resetS: windowStart + this.windowS - nowS, exceeded: hits > limit };
  }

  /** Counts the request; sets the RateLimit-* headers; throws 429 over the limit. */
  async enforce(ctx: AppContext, key: string, limit: number): Promise<void> {
    const state = await this.check(key, limit);
    if (!state) return;
    const headers = {
      'RateLimit-Limit': String(state.limit),
      'RateLimit-Remaining': String(state.remaining),
      'RateLimit-Reset': String(state.resetS),
    };
    for (const [name, value] of Object.entries(headers)) ctx.set(name, value);
    if (state.exceeded) {
      throw new AppError(429, 'rate_limited', 'Too Many Requests', `More than ${state.limit} requests in ${this.windowS} s; retry after ${state.resetS} s.`, undefined, {
        ...headers,
        'Retry-After': String(Math.max(1, state.resetS)),
      });
    }
  }
}
