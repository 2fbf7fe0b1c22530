import { systemClock } from '../clock.js';
import type { Knex } from 'knex';
import { recordEvents, type NewEvent } from '../events/record.js';
import type { Logger } from '../logger.js';
import { presentMembership } from './presenter.js';
import { claimExpired, type MembershipRow } from './repository.js';

export interface ExpirySchedulerOptions {
  db: Knex;
  log: Logger;
  intervalMs: number;
  /** The clock (ms); tests inject one instead of waiting for expirations to pass. */
  now?: () => number;
  batchSize?: number;
}

/**
 * Part of the worker role: every `intervalMs`, records `membership.expired` and
 * `membership.updated` (`change: "expired"`) for each membership whose expiration has passed,
 * once per membership. The mark and the events commit in one transaction and rows are claimed
 * with SKIP LOCKED, so any number of schedulers may run side by side.
 */
export class ExpiryScheduler {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<number> | undefined;
  readonly #now: () => number;
  readonly #batch: number;

  constructor(private readonly options: ExpirySchedulerOptions) {
    this.#now = options.now ?? systemClock;
    this.#batch = options.batchSize ?? 500;
  }

  start(): void {
    this.#timer = setInterval(() => void this.tick(), this.options.intervalMs);
    this.#timer.unref();
    void this.tick();
  }

  /** One pass, unless one is already running; resolves to how many memberships expired. */
  tick(): Promise<number> {
    this.#running ??= this.runOnce()
      .catch((err: unknown) => {
        this.options.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'membership expiry pass failed');
        return 0;
      })
      .finally(() => {
        this.#running = undefined;
      });
    return this.#running;
  }

  async runOnce(): Promise<number> {
    let total = 0;
    for (;;) {
      const at = this.#now();
      const nowS = Math.floor(at / 1000);
      const count = await this.options.db.transaction(async (tx) => {
        const rows = await claimExpired(tx, nowS, this.#batch);
        const byProject = new Map<number, MembershipRow[]>();
        for (const row of rows) byProject.set(row.project_id, [...(byProject.get(row.project_id) ?? []), row]);
        for (const [projectId, list] of byProject) {
          const events = list.flatMap((m): NewEvent[] => {
            const record = presentMembership(m, nowS);
            return [
              { type: 'membership.expired', data: record },
              { type: 'membership.updated', data: { ...record, change: 'expired' } },
            ];
          });
          await recordEvents(tx, projectId, events, new Date(at));
        }
        return rows.length;
      });
      total += count;
      if (count < this.#batch) return total;
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#running;
  }
}
