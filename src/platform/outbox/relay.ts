import { systemClock } from '../runtime/clock.js';
import { ListenConnection } from '../db/listen.js';
import { Lane, type LaneOptions } from './lane.js';
import type { OutboxRegistry } from './registry.js';
import { OUTBOX_CHANNEL } from './repository.js';

/** The lanes' settings (platform/outbox/lane.ts), with defaults for the clock, the fed batch and the inline start. */
export type RelayOptions = Omit<LaneOptions, 'now' | 'eventBatch' | 'inlineStartMs'> &
  Partial<Pick<LaneOptions, 'now' | 'eventBatch' | 'inlineStartMs'>> & {
    /** For the LISTEN connection (a pooled connection cannot keep listening). */
    databaseUrl: string;
    /** The job kinds and feeders the domains registered (src/programs/assembly.ts). */
    registry: OutboxRegistry;
    pollMs: number;
  };

/**
 * Polls the outbox with SKIP LOCKED (woken at once by LISTEN/NOTIFY), one lane per kind of work
 * the registry names (platform/outbox/lane.ts), and never lets a slow row hold up the others.
 */
export class OutboxRelay {
  readonly #lanes: Lane[];
  #timer: NodeJS.Timeout | undefined;
  #listener: ListenConnection | undefined;

  constructor(private readonly options: RelayOptions) {
    const { registry } = options;
    const laneOptions: LaneOptions = {
      ...options,
      now: options.now ?? systemClock,
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
      // Back after an outage: what was committed meanwhile sent no NOTIFY this connection heard.
      onUp: () => this.wake(true),
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
