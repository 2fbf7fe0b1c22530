import { systemClock } from '../runtime/clock.js';
import type { Logger } from './logger.js';
import { setRecent } from '../runtime/recent.js';

/**
 * Warnings an operator needs (an identity provider that fails, a receiver that fails) without a
 * storm flooding the log: one line per cause and target per interval; the next line says how
 * many were held back in between. Bounded: past `maxKeys` causes, the oldest is forgotten.
 */
export class WarnOncePer {
  readonly #last = new Map<string, { at: number; held: number }>();

  constructor(
    private readonly log: Logger,
    private readonly intervalMs = 60_000,
    private readonly maxKeys = 10_000,
    private readonly now: () => number = systemClock,
  ) {}

  /** Logs at warn unless this `key` was logged less than `intervalMs` ago. No secret may be in `fields`. */
  warn(key: string, fields: Record<string, unknown>, message: string): void {
    const now = this.now();
    const seen = this.#last.get(key);
    if (seen && now - seen.at < this.intervalMs) {
      seen.held++;
      return;
    }
    setRecent(this.#last, key, { at: now, held: 0 }, this.maxKeys);
    this.log.warn({ ...fields, ...(seen && seen.held > 0 ? { heldBack: seen.held } : {}) }, message);
  }
}

/** A URL as it may be logged: scheme, host and port only (paths and queries can carry tokens). */
export function loggableOrigin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'invalid URL';
  }
}
