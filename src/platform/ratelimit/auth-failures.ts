import { UnauthorizedError } from '../http/errors.js';
import type { AppContext } from '../http/context.js';
import { tooMany, type RateLimiter } from './limiter.js';

/**
 * Bounds guessing: failed authentications (an unknown API token, an unknown project key) are
 * counted per client address, and an address over the limit is refused with 429 before its
 * credentials are looked at, until its sliding window lets it through again. Checked in memory
 * (the limiter's local counts); nothing is written for a request that authenticates.
 */
export class AuthFailureGuard {
  constructor(
    private readonly limiter: RateLimiter,
    private readonly limit: number,
    private readonly windowS: number,
  ) {}

  #key(ctx: AppContext): string {
    return `authfail:${ctx.request.ip}`;
  }

  /** 429 for an address over its failures. */
  before(ctx: AppContext): void {
    if (this.limit > 0 && this.limiter.over(this.#key(ctx), this.limit)) throw tooMany({ limit: this.limit, resetS: this.windowS }, this.windowS);
  }

  failed(ctx: AppContext): void {
    if (this.limit > 0) this.limiter.count(this.#key(ctx));
  }

  /** Runs `fn`, counting a 401 it throws as a failed authentication. */
  async watch(ctx: AppContext, fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (err) {
      if (err instanceof UnauthorizedError) this.failed(ctx);
      throw err;
    }
  }
}
