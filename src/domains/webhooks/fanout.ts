import type { Knex } from 'knex';
import { pgArray, type Executor } from '../../platform/db/knex.js';
import { eventsFannedOut } from '../../platform/logging/metrics.js';
import {
  eventsOfRows,
  insertEventDeliveries,
  leaseEventRows,
  pendingDeliveriesOf,
  release,
  settleEventRows,
  type ClaimedRow,
  type Outcome,
} from '../../platform/outbox/repository.js';
import type { FedBatch, Feeder } from '../../platform/outbox/registry.js';
import { tenantActive } from '../../access/tenancy/quiet.js';
import { mapInTurns } from '../../platform/runtime/turns.js';
import { hostOf } from './deliver.js';
import type { SubscriptionRow } from './repository.js';

/** One delivery of a recorded event to one subscription, before it has a row of its own. */
interface EventDelivery {
  /** The recorded row holding the event, and the event's place in it (1-based). */
  recordedId: number;
  ord: number;
  projectId: number;
  eventId: string;
  type: string;
  /** The event's stored bytes (its element of the recorded array, verbatim). */
  body: string;
  subscriptionId: number;
  /**
   * Derived from (event, subscription), so a re-send after a crash carries the same `webhook-id`:
   * `msg_` and the first 32 hex digits of SHA-256 of `<event id>:<subscription id>`, computed by
   * the claim's query (thousands at a time, off the event loop).
   */
  messageId: string;
}

/**
 * A subscription's pending deliveries, counted up to the bound (on their own index); one counted
 * at its bound a moment ago is taken as still there, uncounted (Backlog.select).
 */
const PENDING = `(CASE WHEN s.id = ANY(:knownFull::bigint[]) THEN :backlog
  ELSE ${pendingDeliveriesOf('s.id', ':backlog')} END)::int AS pending`;

/**
 * A subscription's backlog is bounded: once it has `backlog` pending deliveries (an endpoint that
 * is down, or slower than its events come), its share of newer recorded rows is not turned into
 * one row per delivery: the recorded row stays pending and names it in `owed_to`. Nothing is
 * copied (a 1,000-item change is one row however many subscriptions wait for it). A row is
 * claimed again once one of the subscriptions it owes is below its bound (oldest first), and is
 * done when it owes nobody. A subscription that is owed rows has its share of newer rows deferred
 * too, so that they keep their turn. A disabled subscription's share waits until it is enabled; a
 * deleted one's ends with no delivery.
 *
 * The backlog counted: a subscription's pending delivery rows, and the deliveries this relay has
 * leased for it that have no row yet (an inline batch writes its rows only when its last attempt
 * ends). `webhook_subscriptions.owed` counts the rows owing it.
 */
class Backlog {
  readonly #leased = new Map<number, number>();
  /** When each subscription was last counted at its bound. */
  readonly #fullAt = new Map<number, number>();

  /**
   * `recountMs`: how long a count at the bound stands. Counting reads up to `bound` index entries
   * per subscription, and the fan-out asks on every claim: a dead endpoint's 1,000 pending rows
   * were read several times per claim. A subscription that drains below its bound is served again
   * at most this much later.
   */
  constructor(
    readonly bound: number,
    private readonly now: () => number,
    private readonly recountMs: number,
  ) {}

  full(subscription: number, pendingRows: number): boolean {
    return pendingRows + (this.#leased.get(subscription) ?? 0) >= this.bound;
  }

  /** Runs a statement with a PENDING column (`s` the subscription) and keeps what it counted at the bound for `recountMs`. */
  async select<R extends { id: number; pending: number }>(db: Executor, sql: string, bindings: Record<string, unknown>): Promise<R[]> {
    const at = this.now();
    const known: number[] = [];
    for (const [id, since] of this.#fullAt) {
      if (since >= at - this.recountMs) known.push(id);
      else this.#fullAt.delete(id);
    }
    const { rows } = await db.raw<{ rows: R[] }>(sql, { ...bindings, backlog: this.bound, knownFull: pgArray(known) });
    for (const r of rows) if (r.pending >= this.bound && !this.#fullAt.has(r.id)) this.#fullAt.set(r.id, at);
    return rows;
  }

  lease(subscriptions: readonly number[], by: 1 | -1): void {
    for (const id of subscriptions) {
      const n = (this.#leased.get(id) ?? 0) + by;
      if (n <= 0) this.#leased.delete(id);
      else this.#leased.set(id, n);
    }
  }
}

/**
 * Of the subscriptions `where` selects, those whose owed share must wait: disabled, or at their
 * bound. A deleted one never waits (its share ends with nothing sent).
 */
async function mustWait(db: Executor, backlog: Backlog, where: string, bindings: Record<string, unknown> = {}): Promise<{ wait: number[]; go: number[] }> {
  const rows = await backlog.select<{ id: number; deleted: boolean; disabled: boolean; pending: number }>(
    db,
    `SELECT s.id, s.deleted_at IS NOT NULL AS deleted, s.disabled_at IS NOT NULL AS disabled, ${PENDING} FROM webhook_subscriptions s WHERE ${where}`,
    bindings,
  );
  const waits = (r: (typeof rows)[number]) => !r.deleted && (r.disabled || backlog.full(r.id, r.pending));
  return { wait: rows.filter(waits).map((r) => r.id), go: rows.filter((r) => !waits(r)).map((r) => r.id) };
}

/** Deliveries one claim may build (see claimEvents). */
const FAN_OUT_BUDGET = 1_000;

interface ClaimedEvents {
  recorded: number[];
  deliveries: EventDelivery[];
  subscriptions: Map<number, SubscriptionRow>;
  /** What each claimed row owed before this fan-out, and still owes after it (none: the row is done). */
  owed: Map<number, Owing>;
}

interface Owing {
  before: readonly number[];
  after: readonly number[];
}

/**
 * Leases up to `limit` recorded event rows (`SKIP LOCKED`: each goes to one relay; a relay that
 * dies loses its lease and another takes them again) and returns their deliveries: one per
 * (event, active subscription of its project that names it, or `*`, or of the subscriptions the
 * row owes), with the subscriptions, and what each row still owes.
 */
async function claimEvents(db: Executor, limit: number, leaseMs: number, busyProjects: readonly number[], backlog: Backlog): Promise<ClaimedEvents> {
  const leased: number[] = [];
  try {
    return await leaseAndFanOut(db, limit, leaseMs, busyProjects, backlog, leased);
  } catch (err) {
    // Each lease committed on its own: the rows go back at once, for the next claim, not the one after their lease.
    await release(db, leased).catch(() => undefined);
    throw err;
  }
}

async function leaseAndFanOut(
  db: Executor,
  limit: number,
  leaseMs: number,
  busyProjects: readonly number[],
  backlog: Backlog,
  leased: number[],
): Promise<ClaimedEvents> {
  // Owed subscriptions whose rows may be fanned out now.
  const servableNow = (await mustWait(db, backlog, 's.owed > 0')).go;
  // Owed rows a subscription may be served now first (they are older), then new ones, each on its own index.
  const lease = async (owing: readonly number[] | null, n: number) => {
    const rows = await leaseEventRows(db, { owing, limit: n, leaseMs, busyProjects, claimable: tenantActive });
    leased.push(...rows.map((r) => r.id));
    return rows;
  };
  const owedRows = servableNow.length === 0 ? [] : await lease(servableNow, limit);
  const claimed = [...owedRows, ...(await lease(null, limit - owedRows.length))];
  const recorded = claimed.map((r) => r.id).sort((a, b) => a - b);
  if (recorded.length === 0) return { recorded, deliveries: [], subscriptions: new Map(), owed: new Map() };
  // A new row's share is deferred for the active subscriptions of its project at their bound or owed older rows.
  const fresh = claimed.filter((r) => r.owed_to === null);
  const candidates =
    fresh.length === 0
      ? []
      : await backlog.select<{ id: number; project_id: number; owed: boolean; pending: number }>(
          db,
          `SELECT s.id, s.project_id, s.owed > 0 AS owed, ${PENDING} FROM webhook_subscriptions s
            WHERE s.project_id = ANY(:projects::bigint[]) AND s.deleted_at IS NULL AND s.disabled_at IS NULL`,
          { projects: pgArray([...new Set(fresh.map((r) => r.project_id))]) },
        );
  const deferring = new Set(candidates.filter((s) => s.owed || backlog.full(s.id, s.pending)).map((s) => s.id));
  // Where each row goes now: a new one, to the active subscriptions of its project not deferred; an
  // owed one, to those it owes that may be served. At most FAN_OUT_BUDGET deliveries a claim: a
  // row of thousands of events goes to a few subscriptions at a time, owing the others, so one
  // turn of the event loop never builds tens of thousands of jobs.
  // Asked again after the claim: a row whose fan-out committed between the first look and the
  // claim may owe a subscription that first look did not know was owed.
  const owedNow = [...new Set(claimed.flatMap((r) => r.owed_to ?? []))];
  const heldSet = new Set(owedNow.length === 0 ? [] : (await mustWait(db, backlog, 's.id = ANY(:ids::bigint[])', { ids: pgArray(owedNow) })).wait);
  const targets = claimed.map((r) => {
    const servable =
      r.owed_to === null
        ? candidates
            .filter((c) => c.project_id === r.project_id)
            .map((c) => c.id)
            .filter((id) => !deferring.has(id))
        : r.owed_to.filter((id) => !heldSet.has(id));
    const waiting =
      r.owed_to === null
        ? candidates.filter((c) => c.project_id === r.project_id && deferring.has(c.id)).map((c) => c.id)
        : r.owed_to.filter((id) => heldSet.has(id));
    const serve = servable.slice(0, Math.max(1, Math.floor(FAN_OUT_BUDGET / Math.max(1, r.events))));
    return { id: r.id, serve, before: r.owed_to ?? [], after: [...waiting, ...servable.slice(serve.length)] };
  });
  // Only rows that go somewhere now are split (a 3,000-event row owed by all was parsed for nothing).
  const serving = targets.filter((t) => t.serve.length > 0);
  const { rows } =
    serving.length === 0
      ? { rows: [] }
      : await db.raw<{
          rows: Array<{
            recorded: number;
            ord: number;
            project_id: number;
            event_id: string;
            type: string;
            body: string;
            subscription_id: number;
            message_id: string;
          }>;
        }>(
          // MATERIALIZED: each recorded row's JSON is split once, not once per subscription joined.
          `WITH t AS (SELECT * FROM json_to_recordset(:targets::json) AS t(id bigint, serve bigint[])),
     e AS MATERIALIZED (
       ${eventsOfRows(':recorded::bigint[]')})
     SELECT e.recorded, e.ord, e.project_id, e.event_id, e.type, e.body, s.id AS subscription_id,
            'msg_' || left(encode(sha256(convert_to(e.event_id || ':' || s.id, 'UTF8')), 'hex'), 32) AS message_id
       FROM e
       JOIN t ON t.id = e.recorded
       JOIN webhook_subscriptions s
         ON s.project_id = e.project_id AND s.deleted_at IS NULL AND s.disabled_at IS NULL
        AND (s.events @> ARRAY[e.type] OR s.events @> ARRAY['*'])
        AND s.id = ANY(t.serve)
      ORDER BY e.recorded, e.ord, s.id`,
          { recorded: pgArray(serving.map((t) => t.id)), targets: JSON.stringify(serving) },
        );
  const ids = [...new Set(rows.map((r) => r.subscription_id))];
  const subs = ids.length === 0 ? [] : await db<SubscriptionRow>('webhook_subscriptions').whereIn('id', ids);
  return {
    recorded,
    deliveries: rows.map((r) => ({
      recordedId: r.recorded,
      ord: r.ord,
      projectId: r.project_id,
      eventId: r.event_id,
      type: r.type,
      body: r.body,
      subscriptionId: r.subscription_id,
      messageId: r.message_id,
    })),
    subscriptions: new Map(subs.map((s) => [s.id, s])),
    owed: new Map(targets.map((t) => [t.id, { before: t.before, after: t.after }])),
  };
}

/**
 * Ends leased recorded rows: their deliveries that did not succeed at once (or were not tried in
 * time) get rows of their own, which retries, the failed list and manual retries work on; the
 * recorded rows are marked done. One transaction. The bodies are not sent back: each is taken
 * again from its recorded row (its element, by place), so a batch of thousands costs little to
 * send and the stored bytes stay exactly the event's.
 */
async function finishEvents(
  db: Knex,
  recorded: readonly number[],
  rest: ReadonlyArray<{ delivery: EventDelivery; url: string; destination: string | null; outcome: Outcome | undefined }>,
  owed: ReadonlyMap<number, Owing>,
): Promise<void> {
  await db.transaction(async (tx) => {
    // One statement, so each recorded row's JSON is split once (in statements of 500 rows, a
    // 3,000-event row was split six times); its parameter is one JSON text built in turns of the
    // event loop (the driver's serialisation of thirteen arrays of thousands was one long turn).
    if (rest.length > 0) {
      const leftovers = await mapInTurns(rest, (r) =>
        JSON.stringify({
          recorded: r.delivery.recordedId,
          ord: r.delivery.ord,
          subscription_id: r.delivery.subscriptionId,
          event_id: r.delivery.eventId,
          url: r.outcome?.url ?? r.url,
          message_id: r.delivery.messageId,
          // The host of the URL the attempt used, when it was not the subscription's at the claim.
          destination: r.outcome?.url && r.outcome.url !== r.url ? (hostOf(r.outcome.url) ?? null) : r.destination,
          status: r.outcome?.status ?? 'pending',
          attempts: r.outcome?.attempted ? 1 : 0,
          retry_ms: r.outcome ? (r.outcome.retryInMs === null ? null : Math.round(r.outcome.retryInMs)) : 0,
          last_status: r.outcome?.lastStatus ?? null,
          last_error: r.outcome?.lastError ?? null,
          last_response_body: r.outcome?.lastResponseBody ?? null,
        }),
      );
      await insertEventDeliveries(tx, [...new Set(rest.map((r) => r.delivery.recordedId))], `[${leftovers.join(',')}]`);
    }
    // Done, or still pending for the subscriptions it owes.
    const owing = recorded.map((id) => owed.get(id)?.after ?? []);
    await settleEventRows(
      tx,
      recorded.map((id, i) => ({ id, owed: owing[i]?.length ? owing[i] : null })),
    );
    // How many rows owe each subscription, changed with the rows themselves.
    const delta = new Map<number, number>();
    for (const id of recorded) {
      const before = new Set(owed.get(id)?.before ?? []);
      const after = new Set(owed.get(id)?.after ?? []);
      for (const s of after) if (!before.has(s)) delta.set(s, (delta.get(s) ?? 0) + 1);
      for (const s of before) if (!after.has(s)) delta.set(s, (delta.get(s) ?? 0) - 1);
    }
    const changed = [...delta].filter(([, d]) => d !== 0).map(([id, d]) => ({ id, d }));
    if (changed.length > 0) {
      await tx.raw(
        `UPDATE webhook_subscriptions s SET owed = greatest(0, s.owed + c.d) FROM json_to_recordset(?::json) AS c(id bigint, d int) WHERE s.id = c.id`,
        [JSON.stringify(changed)],
      );
    }
  });
}

/** A delivery of a recorded event as a job of the relay: a row that exists only in memory until it needs one. */
function jobOf(d: EventDelivery, sub: SubscriptionRow | undefined, destination: string | null, at: Date): ClaimedRow {
  return {
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
    destination,
    created_at: at,
    context: sub ?? null,
  };
}

/**
 * The fan-out (docs/interface.md section 9): recorded events become one delivery per subscription
 * naming them, tried at once; only those that do not succeed get rows of their own.
 */
export function eventFanOut(db: Knex, lane: string, now: () => number, bound: number, recountMs = 1_000): Feeder {
  const backlog = new Backlog(bound, now, recountMs);
  return {
    lane,
    async claim(limit, leaseMs, busyProjects): Promise<FedBatch> {
      const claimed = await claimEvents(db, limit, leaseMs, busyProjects, backlog);
      const leased = claimed.deliveries.map((d) => d.subscriptionId);
      backlog.lease(leased, 1);
      eventsFannedOut.inc({ what: 'events' }, claimed.recorded.length);
      eventsFannedOut.inc({ what: 'deliveries' }, claimed.deliveries.length);
      eventsFannedOut.inc(
        { what: 'deferred' },
        [...claimed.owed.values()].reduce((n, o) => n + o.after.length, 0),
      );
      const at = new Date(now());
      // Each subscription's host once, not once per delivery (thousands of URL parses a claim).
      const hosts = new Map([...claimed.subscriptions].map(([id, sub]) => [id, hostOf(sub.url) ?? null]));
      const pairs = claimed.deliveries.map((d) => ({
        delivery: d,
        job: jobOf(d, claimed.subscriptions.get(d.subscriptionId), hosts.get(d.subscriptionId) ?? null, at),
      }));
      return {
        leased: claimed.recorded.length,
        jobs: pairs.map((p) => p.job),
        finish: (outcomes) => {
          const rest = pairs
            .map(({ delivery, job }) => ({ delivery, url: job.url ?? '', destination: job.destination, outcome: outcomes.get(job) }))
            .filter((r) => r.outcome === undefined || r.outcome.status !== 'done');
          return finishEvents(db, claimed.recorded, rest, claimed.owed).finally(() => backlog.lease(leased, -1));
        },
      };
    },
  };
}
