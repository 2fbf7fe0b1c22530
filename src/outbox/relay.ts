import { deliveries, eventsFannedOut, outboxWork } from '../metrics.js';
import { ListenConnection } from '../db/listen.js';
import type { Logger } from '../logger.js';
import {
  claimDue,
  claimEvents,
  finishEvents,
  laneOf,
  OUTBOX_CHANNEL,
  release,
  settleMany,
  type ClaimedRow,
  type EventDelivery,
  type Outcome,
} from './repository.js';
import type { SubscriptionRow } from '../webhooks/repository.js';
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
  /** Recorded event rows (each holds the events of one change) leased per claim. */
  eventBatch?: number;
  /**
   * An event's delivery not started this long after its claim (its endpoint busy, or too many at
   * once) is not tried inline: it gets a row and goes the row way. Keeps a lease's work short.
   */
  inlineStartMs?: number;
}

/** The deliveries of leased recorded rows, tried straight away; only those that do not succeed get rows. */
class EventBatch {
  readonly outcomes = new Map<EventDelivery, Outcome | undefined>();
  #left: number;

  constructor(
    readonly recorded: number[],
    readonly deliveries: EventDelivery[],
    readonly subscriptions: Map<number, SubscriptionRow>,
    private readonly finish: (batch: EventBatch) => void,
  ) {
    this.#left = deliveries.length;
  }

  /** `outcome` undefined: not tried (deferred to a row). */
  done(delivery: EventDelivery, outcome: Outcome | undefined): void {
    this.outcomes.set(delivery, outcome);
    if (--this.#left === 0) this.finish(this);
  }
}

interface Buffered {
  row: ClaimedRow;
  lane: number | null;
  at: number;
  /** For an event's delivery tried inline: where its outcome goes (instead of a settle). */
  inline?: { batch: EventBatch; delivery: EventDelivery };
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
  #listener: ListenConnection | undefined;
  readonly #idle: Array<() => void> = [];

  constructor(private readonly options: RelayOptions) {}

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
    // New events first: their deliveries are tried at once, and get rows only if they fail.
    const eventBatch = this.options.eventBatch ?? 1;
    while (this.#news && !this.#stopping && this.#buffer.length < this.options.concurrency * 8) {
      try {
        const claimed = await claimEvents(this.options.db, eventBatch, this.options.leaseMs);
        this.#news = claimed.recorded.length === eventBatch;
        if (claimed.recorded.length > 0) this.#inline(new EventBatch(claimed.recorded, claimed.deliveries, claimed.subscriptions, (b) => this.#finish(b)));
      } catch (err) {
        this.options.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'event claim failed');
        break;
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

  // Claimed rows and inline deliveries not started yet (their endpoint may be at its limit).
  #buffer: Buffered[] = [];
  readonly #batches = new Set<Promise<void>>();

  /** Queues a claimed batch's deliveries as attempts with no row of their own yet. */
  #inline(batch: EventBatch): void {
    eventsFannedOut.inc({ what: 'events' }, batch.recorded.length);
    eventsFannedOut.inc({ what: 'deliveries' }, batch.deliveries.length);
    if (batch.deliveries.length === 0) {
      this.#finish(batch);
      return;
    }
    const at = Date.now();
    for (const d of batch.deliveries) {
      const sub = batch.subscriptions.get(d.subscriptionId);
      const row: ClaimedRow = {
        id: 0,
        project_id: d.projectId,
        kind: 'delivery',
        delivery_kind: 'subscription',
        wallet_id: null,
        subscription_id: d.subscriptionId,
        event: d.type,
        event_id: d.eventId,
        url: sub?.url ?? null,
        payload: d.body,
        message_id: d.messageId,
        status: 'pending',
        attempts: 0,
        next_attempt_at: null,
        last_status: null,
        last_error: null,
        last_response_body: null,
        last_attempt_at: null,
        manual_retry: false,
        created_at: new Date(at),
        subscription: sub ?? null,
      };
      this.#buffer.push({ row, lane: laneOf(row), at, inline: { batch, delivery: d } });
    }
    this.#startBuffered();
  }

  /** All of a batch's deliveries have an outcome: rows for the ones that did not succeed, the recorded rows done. */
  #finish(batch: EventBatch): void {
    const rest = batch.deliveries
      .map((delivery) => ({ delivery, url: batch.subscriptions.get(delivery.subscriptionId)?.url ?? '', outcome: batch.outcomes.get(delivery) }))
      .filter((r) => r.outcome === undefined || r.outcome.status !== 'done');
    const finishing = finishEvents(this.options.db, batch.recorded, rest)
      .catch((err: unknown) => {
        // The leases run out and another relay sends them again, with the same webhook-ids.
        this.options.log.warn({ err: err instanceof Error ? err.message : String(err), recorded: batch.recorded }, 'event batch not finished');
      })
      .finally(() => {
        this.#batches.delete(finishing);
        this.#checkIdle();
      });
    this.#batches.add(finishing);
  }

  /** Starts buffered rows while slots are free, skipping endpoints at their limit. */
  #startBuffered(): void {
    if (this.#stopping || this.#inFlight >= this.options.concurrency || this.#buffer.length === 0) return;
    const waiting: Buffered[] = [];
    let i = 0;
    for (; i < this.#buffer.length && this.#inFlight < this.options.concurrency; i++) {
      const item = this.#buffer[i] as Buffered;
      if (item.lane === null || (this.#lanes.get(item.lane) ?? 0) < this.options.endpointConcurrency) this.#run(item.row, item.lane, item.inline);
      else waiting.push(item);
    }
    // One pass, one copy (the buffer can hold thousands of an event batch's deliveries).
    if (i > 0) this.#buffer = waiting.concat(this.#buffer.slice(i));
  }

  /**
   * Gives back rows that waited in the buffer for a quarter of their lease (their endpoint stayed
   * at its limit), well before the lease could run out and let another relay take them too.
   */
  #releaseStale(): void {
    const now = Date.now();
    const rowLimit = now - this.options.leaseMs / 4;
    const inlineLimit = now - (this.options.inlineStartMs ?? 2_000);
    // The buffer stays in claim order (waiting items first, and they are the oldest): nothing is
    // stale unless its first item is.
    const first = this.#buffer[0];
    if (!first || first.at >= Math.min(rowLimit, inlineLimit)) return;
    const stale = this.#buffer.filter((b) => (b.inline ? b.at < inlineLimit : b.at < rowLimit));
    if (stale.length === 0) return;
    const gone = new Set(stale);
    this.#buffer = this.#buffer.filter((b) => !gone.has(b));
    for (const b of stale) b.inline?.batch.done(b.inline.delivery, undefined);
    const rows = stale.filter((b) => !b.inline).map((b) => b.row.id);
    if (rows.length > 0) void release(this.options.db, rows).catch(() => undefined);
  }

  /**
   * One attempt in a slot. The slot (and the endpoint's share) is free as soon as the attempt
   * ends; its outcome is recorded with others in the next settle statement. Until then the row's
   * lease keeps it from being claimed again.
   */
  #run(row: ClaimedRow, lane: number | null, inline?: Buffered['inline']): void {
    this.#inFlight++;
    if (lane !== null) this.#lanes.set(lane, (this.#lanes.get(lane) ?? 0) + 1);
    void (async () => {
      let outcome: Outcome | undefined;
      try {
        outcome = await this.options.handle(row);
      } catch (err) {
        if (inline) {
          // Not known to be sent: it gets a row and is tried again the row way.
          outcome = undefined;
        }
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
      if (inline) {
        if (outcome) count(row, outcome);
        inline.batch.done(inline.delivery, outcome);
      } else if (outcome) {
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
    if (this.#inFlight === 0 && this.#toSettle.length === 0 && !this.#settling && this.#batches.size === 0) for (const done of this.#idle.splice(0)) done();
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
    // Inline deliveries not started get rows (their batches finish).
    const unstarted = this.#buffer.splice(0);
    for (const b of unstarted) b.inline?.batch.done(b.inline.delivery, undefined);
    await release(
      this.options.db,
      unstarted.filter((b) => !b.inline).map((b) => b.row.id),
    ).catch(() => undefined);
    if (this.#inFlight > 0 || this.#toSettle.length > 0 || this.#settling || this.#batches.size > 0) {
      await new Promise<void>((resolve) => this.#idle.push(resolve));
    }
    await this.#listener?.stop();
  }
}
