import pg from 'pg';
import type { Logger } from '../logger.js';
import { claimDue, fanOutEvents, laneOf, OUTBOX_CHANNEL, release, settle, type Outcome, type OutboxRow } from './repository.js';
import type { Knex } from 'knex';

export type OutboxHandler = (row: OutboxRow) => Promise<Outcome>;

export interface RelayOptions {
  db: Knex;
  /** For the LISTEN connection (a pooled connection cannot keep listening). */
  databaseUrl: string;
  handle: OutboxHandler;
  log: Logger;
  concurrency: number;
  pollMs: number;
  /** How long a claimed row stays ours; longer than any attempt can take. */
  leaseMs: number;
  /** Attempts in flight per endpoint, so that a slow endpoint never holds every slot. */
  endpointConcurrency: number;
  /** Recorded event rows (each holds the events of one change) fanned out per statement. */
  fanOutBatch?: number;
}

/**
 * Polls the outbox with SKIP LOCKED (woken at once by LISTEN/NOTIFY), keeps up to
 * `concurrency` rows in flight, and never lets a slow row hold up the others: each row is
 * settled on its own and a free slot claims the next one.
 */
export class OutboxRelay {
  #inFlight = 0;
  readonly #lanes = new Map<number, number>();
  #stopping = false;
  #pumping = false;
  #again = false;
  #timer: NodeJS.Timeout | undefined;
  #listener: pg.Client | undefined;
  readonly #idle: Array<() => void> = [];

  constructor(private readonly options: RelayOptions) {}

  async start(): Promise<void> {
    await this.#listen();
    this.#timer = setInterval(() => this.wake(), this.options.pollMs);
    this.#timer.unref();
    this.wake();
  }

  async #listen(): Promise<void> {
    if (this.#stopping) return;
    const client = new pg.Client({ connectionString: this.options.databaseUrl });
    client.on('notification', () => this.wake());
    client.on('error', () => {
      // The database went away: polling goes on; listen again when it is back.
      void client.end().catch(() => undefined);
      if (this.#listener === client) this.#listener = undefined;
      setTimeout(() => void this.#listen().catch(() => undefined), 1_000).unref();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${OUTBOX_CHANNEL}`);
      this.#listener = client;
    } catch {
      await client.end().catch(() => undefined);
      setTimeout(() => void this.#listen().catch(() => undefined), 1_000).unref();
    }
  }

  wake(): void {
    if (this.#stopping) return;
    if (this.#pumping) {
      this.#again = true;
      return;
    }
    this.#pumping = true;
    void this.#pump().finally(() => {
      this.#pumping = false;
      if (this.#again) {
        this.#again = false;
        this.wake();
      }
    });
  }

  async #pump(): Promise<void> {
    const batch = this.options.fanOutBatch ?? 50;
    try {
      while ((await fanOutEvents(this.options.db, batch)).events === batch && !this.#stopping);
    } catch (err) {
      this.options.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'event fan-out failed');
    }
    for (;;) {
      const free = this.options.concurrency - this.#inFlight;
      if (free <= 0 || this.#stopping) return;
      const busy = [...this.#lanes].filter(([, n]) => n >= this.options.endpointConcurrency).map(([lane]) => lane);
      let rows: OutboxRow[];
      try {
        rows = await claimDue(this.options.db, free, this.options.leaseMs, busy);
      } catch (err) {
        this.options.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'outbox poll failed');
        return;
      }
      const extra: number[] = [];
      for (const row of rows) {
        const lane = laneOf(row);
        if (lane !== null && (this.#lanes.get(lane) ?? 0) >= this.options.endpointConcurrency) extra.push(row.id);
        else this.#run(row, lane);
      }
      if (extra.length > 0) {
        await release(this.options.db, extra).catch(() => undefined);
        // Those endpoints are full now; the next pass leaves them out.
        if (extra.length === rows.length) return;
        continue;
      }
      if (rows.length < free) return;
    }
  }

  #run(row: OutboxRow, lane: number | null): void {
    this.#inFlight++;
    if (lane !== null) this.#lanes.set(lane, (this.#lanes.get(lane) ?? 0) + 1);
    void (async () => {
      try {
        const outcome = await this.options.handle(row);
        await settle(this.options.db, row.id, outcome);
      } catch (err) {
        // Left claimed: the lease runs out and the row is tried again.
        this.options.log.warn({ outboxId: row.id, kind: row.kind, err: err instanceof Error ? err.message : String(err) }, 'outbox row not settled');
      } finally {
        this.#inFlight--;
        if (lane !== null) {
          const left = (this.#lanes.get(lane) ?? 1) - 1;
          if (left === 0) this.#lanes.delete(lane);
          else this.#lanes.set(lane, left);
        }
        if (this.#inFlight === 0) for (const done of this.#idle.splice(0)) done();
        this.wake();
      }
    })();
  }

  /** Stops claiming, waits for what is in flight, closes the listener. */
  async stop(): Promise<void> {
    this.#stopping = true;
    clearInterval(this.#timer);
    if (this.#inFlight > 0) await new Promise<void>((resolve) => this.#idle.push(resolve));
    await this.#listener?.end().catch(() => undefined);
  }
}
