import { deliveries, eventsFannedOut, outboxWork } from '../metrics.js';
import pg from 'pg';
import type { Logger } from '../logger.js';
import { claimDue, fanOutEvents, laneOf, OUTBOX_CHANNEL, release, settleMany, type ClaimedRow, type Outcome } from './repository.js';
import type { Knex } from 'knex';

export type OutboxHandler = (row: ClaimedRow) => Promise<Outcome>;

function count(row: ClaimedRow, outcome: Outcome): void {
  const result = outcome.status === 'pending' ? 'retry' : outcome.status;
  outboxWork.inc({ kind: row.kind, outcome: result });
  if (row.kind === 'delivery') {
    const delivered = outcome.status === 'done' ? (outcome.attempted ? 'delivered' : 'dropped') : result;
    deliveries.inc({ kind: row.delivery_kind ?? 'wallet', outcome: delivered });
  }
}

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
  #news = true;
  #timer: NodeJS.Timeout | undefined;
  #listener: pg.Client | undefined;
  readonly #idle: Array<() => void> = [];

  constructor(private readonly options: RelayOptions) {}

  async start(): Promise<void> {
    await this.#listen();
    this.#timer = setInterval(() => this.wake(true), this.options.pollMs);
    this.#timer.unref();
    this.wake(true);
  }

  async #listen(): Promise<void> {
    if (this.#stopping) return;
    const client = new pg.Client({ connectionString: this.options.databaseUrl });
    client.on('notification', () => this.wake(true));
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

  /** `news`: something was committed (a NOTIFY) or the poll timer fired, so events may wait for their fan-out. */
  wake(news = false): void {
    if (news) this.#news = true;
    if (this.#stopping) return;
    this.#startBuffered();
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
    if (this.#news) {
      this.#news = false;
      try {
        for (;;) {
          const done = await fanOutEvents(this.options.db, batch);
          eventsFannedOut.inc({ what: 'events' }, done.events);
          eventsFannedOut.inc({ what: 'deliveries' }, done.deliveries);
          if (done.events < batch || this.#stopping) break;
        }
      } catch (err) {
        this.#news = true;
        this.options.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'event fan-out failed');
      }
    }
    // Claims run one at a time (this pump is single-flight) and ahead of need: rows wait in a
    // small local buffer, so a freed slot starts its next attempt at once, without a round trip.
    const ahead = this.options.concurrency * 8;
    for (;;) {
      this.#startBuffered();
      this.#releaseStale();
      const want = ahead - this.#inFlight - this.#buffer.length;
      if (this.#stopping || want < this.options.concurrency * 2) return;
      const busy = [...this.#lanes].filter(([, n]) => n >= this.options.endpointConcurrency).map(([lane]) => lane);
      let rows: ClaimedRow[];
      try {
        rows = await claimDue(this.options.db, want, this.options.leaseMs, busy);
      } catch (err) {
        this.options.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'outbox poll failed');
        return;
      }
      const at = Date.now();
      for (const row of rows) this.#buffer.push({ row, lane: laneOf(row), at });
      if (rows.length < want) {
        this.#startBuffered();
        return;
      }
    }
  }

  // Claimed rows not started yet (their endpoint may be at its limit).
  #buffer: Array<{ row: ClaimedRow; lane: number | null; at: number }> = [];

  /** Starts buffered rows while slots are free, skipping endpoints at their limit. */
  #startBuffered(): void {
    if (this.#stopping) return;
    for (let i = 0; i < this.#buffer.length && this.#inFlight < this.options.concurrency; ) {
      const item = this.#buffer[i];
      if (item && (item.lane === null || (this.#lanes.get(item.lane) ?? 0) < this.options.endpointConcurrency)) {
        this.#buffer.splice(i, 1);
        this.#run(item.row, item.lane);
      } else {
        i++;
      }
    }
  }

  /**
   * Gives back rows that waited in the buffer for a quarter of their lease (their endpoint stayed
   * at its limit), well before the lease could run out and let another relay take them too.
   */
  #releaseStale(): void {
    const limit = Date.now() - this.options.leaseMs / 4;
    const stale = this.#buffer.filter((b) => b.at < limit);
    if (stale.length === 0) return;
    this.#buffer = this.#buffer.filter((b) => b.at >= limit);
    void release(this.options.db, stale.map((b) => b.row.id)).catch(() => undefined);
  }

  /**
   * One attempt in a slot. The slot (and the endpoint's share) is free as soon as the attempt
   * ends; its outcome is recorded with others in the next settle statement. Until then the row's
   * lease keeps it from being claimed again.
   */
  #run(row: ClaimedRow, lane: number | null): void {
    this.#inFlight++;
    if (lane !== null) this.#lanes.set(lane, (this.#lanes.get(lane) ?? 0) + 1);
    void (async () => {
      let outcome: Outcome | undefined;
      try {
        outcome = await this.options.handle(row);
      } catch (err) {
        // Left claimed: the lease runs out and the row is tried again.
        this.options.log.warn({ outboxId: row.id, kind: row.kind, err: err instanceof Error ? err.message : String(err) }, 'outbox row not handled');
      }
      this.#inFlight--;
      if (lane !== null) {
        const left = (this.#lanes.get(lane) ?? 1) - 1;
        if (left === 0) this.#lanes.delete(lane);
        else this.#lanes.set(lane, left);
      }
      this.wake();
      if (outcome) {
        count(row, outcome);
        try {
          await this.#settle(row.id, outcome);
        } catch (err) {
          this.options.log.warn({ outboxId: row.id, kind: row.kind, err: err instanceof Error ? err.message : String(err) }, 'outbox row not settled');
        }
      }
      this.#checkIdle();
    })();
  }

  #checkIdle(): void {
    if (this.#inFlight === 0 && this.#toSettle.length === 0 && !this.#settling) for (const done of this.#idle.splice(0)) done();
  }

  // Outcomes that finish while a settle statement runs wait for the next one: one UPDATE for many.
  #toSettle: Array<{ id: number; outcome: Outcome; done: (err?: unknown) => void }> = [];
  #settling = false;

  #settle(id: number, outcome: Outcome): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#toSettle.push({ id, outcome, done: (err) => (err === undefined ? resolve() : reject(err instanceof Error ? err : new Error('settle failed'))) });
      if (!this.#settling) void this.#flush();
    });
  }

  async #flush(): Promise<void> {
    this.#settling = true;
    while (this.#toSettle.length > 0) {
      const batch = this.#toSettle.splice(0, 500);
      try {
        await settleMany(this.options.db, batch);
        for (const item of batch) item.done();
      } catch (err) {
        for (const item of batch) item.done(err);
      }
    }
    this.#settling = false;
    this.#checkIdle();
  }

  /** Stops claiming, waits for what is in flight, closes the listener. */
  async stop(): Promise<void> {
    this.#stopping = true;
    clearInterval(this.#timer);
    // What was claimed but not started goes back at once, for other relays.
    const unstarted = this.#buffer.splice(0).map((b) => b.row.id);
    await release(this.options.db, unstarted).catch(() => undefined);
    if (this.#inFlight > 0 || this.#toSettle.length > 0 || this.#settling) await new Promise<void>((resolve) => this.#idle.push(resolve));
    await this.#listener?.end().catch(() => undefined);
  }
}
