import { systemClock } from '../runtime/clock.js';
import { Redis } from 'ioredis';
import type { Knex } from 'knex';
import { AppError } from '../http/errors.js';
import type { AppContext } from '../http/context.js';
import type { Logger } from '../logging/logger.js';
import { outsideRequests } from '../db/held.js';

/** One key's hits added in a window, as a flush sends them. */
export interface HitBatch {
  key: string;
  windowStart: number;
  hits: number;
}

/** What the store holds for a key after a flush: this window's total (every process) and the previous one's. */
export interface StoreTotals {
  key: string;
  windowStart: number;
  current: number;
  previous: number;
}

/** Where hits are counted across processes: PostgreSQL by default, Redis when REDIS_URL is set. */
export interface RateLimitStore {
  /** Adds each batch's hits to its window and answers the totals (this window and the one before), in one round trip. */
  add(batches: HitBatch[], windowS: number): Promise<StoreTotals[]>;
  /** Drops windows that ended before `before` (Unix seconds); a no-op where keys expire by themselves. */
  prune(before: number): Promise<void>;
  close(): Promise<void>;
}

export class PgRateLimitStore implements RateLimitStore {
  constructor(private readonly db: Knex) {}

  async add(batches: HitBatch[], windowS: number): Promise<StoreTotals[]> {
    if (batches.length === 0) return [];
    const { rows } = await this.db.raw<{ rows: Array<{ key: string; window_start: string; current: number; previous: number | null }> }>(
      `WITH up AS (
         INSERT INTO rate_limits (key, window_start, hits)
         SELECT * FROM unnest(?::text[], ?::bigint[], ?::int[])
         ON CONFLICT (key, window_start) DO UPDATE SET hits = rate_limits.hits + EXCLUDED.hits
         RETURNING key, window_start, hits)
       SELECT up.key, up.window_start, up.hits AS current,
              (SELECT p.hits FROM rate_limits p WHERE p.key = up.key AND p.window_start = up.window_start - ?) AS previous
         FROM up`,
      [batches.map((b) => b.key), batches.map((b) => b.windowStart), batches.map((b) => b.hits), windowS],
    );
    return rows.map((r) => ({ key: r.key, windowStart: Number(r.window_start), current: r.current, previous: r.previous ?? 0 }));
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

  async add(batches: HitBatch[], windowS: number): Promise<StoreTotals[]> {
    if (batches.length === 0) return [];
    const name = (key: string, windowStart: number) => `${this.prefix}:rl:${key}:${windowStart}`;
    const multi = this.#redis.multi();
    for (const b of batches) {
      const current = name(b.key, b.windowStart);
      multi
        .incrby(current, b.hits)
        .expire(current, windowS * 3)
        .get(name(b.key, b.windowStart - windowS));
    }
    const results = await multi.exec();
    if (!results) throw new Error('redis answered no results');
    return batches.map((b, i) => {
      const current = results[i * 3]?.[1];
      const previous = results[i * 3 + 2]?.[1];
      if (typeof current !== 'number') throw new Error('redis answered no count');
      return { key: b.key, windowStart: b.windowStart, current, previous: typeof previous === 'string' ? Number(previous) : 0 };
    });
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

interface KeyState {
  windowStart: number;
  /** Totals of every process as the store last answered them. */
  storeCurrent: number;
  storePrevious: number;
  /** This process's hits in `windowStart` not yet sent to the store. */
  pending: number;
  /** Sent, but the store has not answered yet: still counted until its answer includes them. */
  sending: number;
}

/**
 * A sliding window per key (the previous window's count, weighted by how much of it still
 * overlaps the last `windowS` seconds, plus the current window's), so a window boundary never
 * admits twice the limit. Decisions are made in this process from what the store last said plus
 * this process's own hits since; hits are sent to the store in batches every `flushMs` (one round
 * trip per flush for every key), never one write per request. The bound on overshoot across
 * processes: each can admit what it sees in one flush interval beyond what the others' hits let it
 * know (docs/security.md). A store that fails leaves every process to its own counts, and says so.
 */
export class RateLimiter {
  readonly #keys = new Map<string, KeyState>();
  /** Unsent hits of windows that ended: sent with the next flush, under the window they belong to. */
  readonly #owed: HitBatch[] = [];
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;
  #warned = 0;

  constructor(
    private readonly store: RateLimitStore,
    private readonly windowS: number,
    private readonly log: Logger,
    private readonly now: () => number = systemClock,
    private readonly flushMs = 250,
  ) {}

  #state(key: string, windowStart: number): KeyState {
    let s = this.#keys.get(key);
    if (!s) {
      s = { windowStart, storeCurrent: 0, storePrevious: 0, pending: 0, sending: 0 };
      this.#keys.set(key, s);
    } else if (s.windowStart !== windowStart) {
      // A new window: the old one's total (as known, with our unsent hits) becomes the weighted past.
      const known = s.storeCurrent + s.pending + s.sending;
      s.storePrevious = windowStart - s.windowStart === this.windowS ? known : 0;
      s.storeCurrent = 0;
      s.windowStart = windowStart;
      if (s.pending > 0) this.#owed.push({ key, windowStart: windowStart - this.windowS, hits: s.pending });
      s.pending = 0;
      s.sending = 0;
    }
    return s;
  }

  /** The sliding estimate of hits in the last `windowS` seconds, everything this process knows of included. */
  #estimate(s: KeyState, nowS: number): number {
    const elapsed = nowS - s.windowStart;
    return s.storePrevious * ((this.windowS - elapsed) / this.windowS) + s.storeCurrent + s.sending + s.pending;
  }

  /** Counts one hit of `key` and says whether it is over `limit`. No I/O: the store hears of it at the next flush. */
  check(key: string, limit: number): RateLimitState | undefined {
    if (limit <= 0) return undefined;
    const nowS = this.now() / 1000;
    const windowStart = Math.floor(nowS / this.windowS) * this.windowS;
    const s = this.#state(key, windowStart);
    const estimate = this.#estimate(s, nowS);
    const exceeded = estimate + 1 > limit;
    if (!exceeded) s.pending++;
    this.#schedule();
    return { limit, remaining: Math.max(0, Math.floor(limit - estimate - (exceeded ? 0 : 1))), resetS: Math.ceil(windowStart + this.windowS - nowS), exceeded };
  }

  /** Counts a hit without a decision (failed authentications are counted after they failed). */
  count(key: string): void {
    const nowS = this.now() / 1000;
    const s = this.#state(key, Math.floor(nowS / this.windowS) * this.windowS);
    s.pending++;
    this.#schedule();
  }

  /** Whether `key` is over `limit` now, without counting a hit. */
  over(key: string, limit: number): boolean {
    if (limit <= 0) return false;
    const nowS = this.now() / 1000;
    const windowStart = Math.floor(nowS / this.windowS) * this.windowS;
    if (!this.#keys.has(key)) return false;
    return this.#estimate(this.#state(key, windowStart), nowS) >= limit;
  }

  #schedule(): void {
    if (this.#timer || this.flushMs <= 0) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      // Every request's hits, not the one whose hit started the timer (platform/db/held.ts).
      void outsideRequests(() => this.flush());
    }, this.flushMs);
    this.#timer.unref();
  }

  /** Sends every unsent hit to the store and takes back the totals every process has made. */
  flush(): Promise<void> {
    this.#flushing ??= this.#flush().finally(() => (this.#flushing = undefined));
    return this.#flushing;
  }

  async #flush(): Promise<void> {
    const batches: HitBatch[] = this.#owed.splice(0);
    const sent = new Map<string, number>();
    for (const [key, s] of this.#keys) {
      if (s.pending === 0) continue;
      batches.push({ key, windowStart: s.windowStart, hits: s.pending });
      sent.set(key, s.pending);
      s.sending += s.pending;
      s.pending = 0;
    }
    if (batches.length === 0) return;
    try {
      const totals = await this.store.add(batches, this.windowS);
      for (const t of totals) {
        const s = this.#keys.get(t.key);
        // Totals of a window that has ended since (owed hits) are of no use to a decision now.
        if (!s || t.windowStart !== s.windowStart) continue;
        s.storeCurrent = t.current;
        s.storePrevious = Math.max(s.storePrevious, t.previous);
        s.sending = Math.max(0, s.sending - (sent.get(t.key) ?? 0));
      }
    } catch (err) {
      // Kept locally (counted here, sent at a later flush): limits still hold per process.
      for (const [key, hits] of sent) {
        const s = this.#keys.get(key);
        if (!s) continue;
        const stillHere = Math.min(hits, s.sending);
        s.sending -= stillHere;
        s.pending += stillHere;
      }
      if (this.now() - this.#warned > 10_000) {
        this.#warned = this.now();
        this.log.warn(
          { err: err instanceof Error ? err.message : String(err) },
          'rate-limit store unavailable; each process limits on its own counts until it is back',
        );
      }
    }
    this.#forgetIdle();
  }

  /** Keys whose windows both ended and that have nothing to send are dropped (memory stays bounded by active keys). */
  #forgetIdle(): void {
    const nowS = this.now() / 1000;
    for (const [key, s] of this.#keys) {
      if (s.pending === 0 && nowS - s.windowStart >= 2 * this.windowS) this.#keys.delete(key);
    }
  }

  /** Stops the flush timer after one last flush. */
  async close(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.flush();
  }

  /** Counts the request; sets the RateLimit-* headers; throws 429 over the limit. */
  enforce(ctx: AppContext, key: string, limit: number): void {
    const state = this.check(key, limit);
    if (!state) return;
    const headers = {
      'RateLimit-Limit': String(state.limit),
      'RateLimit-Remaining': String(state.remaining),
      'RateLimit-Reset': String(state.resetS),
    };
    for (const [name, value] of Object.entries(headers)) ctx.set(name, value);
    if (state.exceeded) throw tooMany(state, this.windowS, headers);
  }
}

export function tooMany(state: Pick<RateLimitState, 'limit' | 'resetS'>, windowS: number, headers: Record<string, string> = {}): AppError {
  return new AppError(
    429,
    'rate_limited',
    'Too Many Requests',
    `More than ${state.limit} requests in ${windowS} s; retry after ${state.resetS} s.`,
    undefined,
    {
      ...headers,
      'Retry-After': String(Math.max(1, state.resetS)),
    },
  );
}
