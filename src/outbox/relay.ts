import type { Knex } from 'knex';
import { systemClock, type Clock } from '../clock.js';
import { ListenConnection } from '../db/listen.js';
import type { Logger } from '../logger.js';
import { Lane } from './lane.js';
import type { OutboxRegistry } from './registry.js';
import { OUTBOX_CHANNEL } from './repository.js';

export interface RelayOptions {
  db: Knex;
  /** For the LISTEN connection (a pooled connection cannot keep listening). */
  databaseUrl: string;
  /** The job kinds and feeders the domains registered (src/assembly.ts). */
  registry: OutboxRegistry;
  log: Logger;
  /** Attempts in flight per lane. */
  concurrency: number;
  /** Attempts in flight per project in a lane. */
  projectConcurrency: number;
  /** Attempts in flight per destination host in a lane. */
  hostConcurrency: number;
  pollMs: number;
  /** How long a claimed row stays ours; longer than any attempt can take. */
  leaseMs: number;
  /** The tenancy's condition on claimable rows (tenancy/quiet.ts). */
  claimable: string;
  /** Recorded event rows (each holds the events of one change) leased per claim. */
  eventBatch?: number;
  /**
   * A fed job not started this long after its claim (its host busy, or too many at once) is not
   * tried inline: it gets a row and goes the row way. Keeps a lease's work short.
   */
  inlineStartMs?: number;
  now?: Clock;
}

/**
 * Polls the outbox with SKIP LOCKED (woken at once by LISTEN/NOTIFY), one lane per kind of work
 * the registry names (outbox/lane.ts), and never lets a slow row hold up the others.
 */
export class OutboxRelay {
  readonly #lanes: Lane[];
  #timer: NodeJS.Timeout | undefined;
  #listener: ListenConnection | undefined;

  constructor(private readonly options: RelayOptions) {
    const { registry } = options;
    const laneOptions = {
      db: options.db,
      log: options.log,
      now: options.now ?? systemClock,
      concurrency: options.concurrency,
      projectConcurrency: options.projectConcurrency,
      hostConcurrency: options.hostConcurrency,
      leaseMs: options.leaseMs,
      claimable: options.claimable,
      eventBatch: options.eventBatch ?? 1,
      inlineStartMs: options.inlineStartMs ?? 2_000,
    };
    this.#lanes = registry.lanes().map((lane) => new Lane(lane, registry.kindsIn(lane), registry.feedersIn(lane), (row) => registry.kindOf(row), laneOptions));
  }

  async start(): Promise<void> {
    // The database gone away: polling goes on; it listens again once it is back.
    this.#listener = new ListenConnection({
      databaseUrl: this.options.databaseUrl,
      channel: OUTBOX_CHANNEL,
      retryMs: 1_000,
      onNotification: () => this.wake(true),
    });
    await this.#listener.start();
    this.#timer = setInterval(() => this.wake(true), this.options.pollMs);
    this.#timer.unref();
    this.wake(true);
  }

  /** `news`: something was committed (a NOTIFY) or the poll timer fired. */
  wake(news = false): void {
    for (const lane of this.#lanes) lane.wake(news);
  }

  /** Stops claiming, waits for what is in flight, closes the listener. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await Promise.all(this.#lanes.map((lane) => lane.stop()));
    await this.#listener?.stop();
  }
}
