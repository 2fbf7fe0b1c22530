import type { Knex } from 'knex';
import type { Clock } from '../runtime/clock.js';
import type { Logger } from '../logging/logger.js';
import { deliveries, outboxWork } from '../logging/metrics.js';
import type { FedBatch, Feeder, JobKind } from './registry.js';
import { claimDue, release, settleMany, type ClaimedRow, type KindKey, type Outcome } from './repository.js';

export interface LaneOptions {
  db: Knex;
  log: Logger;
  now: Clock;
  /** Attempts in flight in this lane. */
  concurrency: number;
  /** Attempts in flight per project: one tenant never holds every slot of a lane. */
  projectConcurrency: number;
  /** Attempts in flight per destination host: a slow receiver never holds every slot either. */
  hostConcurrency: number;
  /** How long a claimed row stays ours; longer than any attempt can take. */
  leaseMs: number;
  /** The tenancy's condition on a claimable row's project id column (a deleted organisation's work waits). */
  claimable: (projectId: string) => string;
  /** Recorded rows leased per feeder claim. */
  eventBatch: number;
  /** A fed job not started this long after its claim is not tried inline: it gets a row. */
  inlineStartMs: number;
  /** The relay's poll: a row to be tried again sooner than this wakes the lane at its time. */
  pollMs: number;
}

function count(row: ClaimedRow, outcome: Outcome): void {
  const result = outcome.status === 'pending' ? 'retry' : outcome.status;
  outboxWork.inc({ kind: row.kind, outcome: result });
  if (row.kind === 'delivery') {
    const delivered = outcome.status === 'done' ? (outcome.attempted ? 'delivered' : 'dropped') : result;
    deliveries.inc({ kind: row.delivery_kind ?? 'wallet', outcome: delivered });
  }
}

/** The jobs of one fed batch, tried straight away; when all have an outcome, the feeder records the rest. */
class InlineBatch {
  readonly outcomes = new Map<ClaimedRow, Outcome | undefined>();
  #left: number;

  constructor(
    readonly fed: FedBatch,
    private readonly finish: (batch: InlineBatch) => void,
  ) {
    this.#left = fed.jobs.length;
  }

  /** `outcome` undefined: not tried (left to a row). */
  done(job: ClaimedRow, outcome: Outcome | undefined): void {
    this.outcomes.set(job, outcome);
    if (--this.#left === 0) this.finish(this);
  }
}

interface Buffered {
  row: ClaimedRow;
  job: JobKind;
  host: string | undefined;
  at: number;
  /** A fed job: its outcome goes to its batch instead of a settle. */
  inline?: InlineBatch;
}

/** Attempts in flight plus buffered work, per project and per host (Lane#load). */
interface Load {
  projects: Map<number, number>;
  hosts: Map<string, number>;
}

const bump = <K>(map: Map<K, number>, key: K, by: number): void => {
  const n = (map.get(key) ?? 0) + by;
  if (n === 0) map.delete(key);
  else map.set(key, n);
};

/**
 * Due times ahead, in order, on a grain of a few milliseconds (one wake claims every row due by
 * then), at most 1,000 (the latest beyond that are left to the poll).
 */
class DueTimes {
  readonly #times: number[] = [];

  add(due: number): void {
    // Rounded up: a wake may come late for a row, never early.
    const at = Math.ceil(due / DUE_GRAIN_MS) * DUE_GRAIN_MS;
    const t = this.#times;
    let lo = 0;
    let hi = t.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (t[mid]! < at) lo = mid + 1;
      else hi = mid;
    }
    if (t[lo] === at) return;
    t.splice(lo, 0, at);
    if (t.length > 1_000) t.pop();
  }

  first(): number | undefined {
    return this.#times[0];
  }

  /** Forgets the times up to `now` (their wake has come). */
  dropUntil(now: number): void {
    let n = 0;
    while (n < this.#times.length && this.#times[n]! <= now) n++;
    this.#times.splice(0, n);
  }
}
/** The grain of due times: rows due within one share a wake. */
const DUE_GRAIN_MS = 10;

/**
 * One lane of the relay: its own slots, claims and buffer, so that work in one lane (webhook
 * traffic) never waits for another's (wallet creation). Inside a lane, bounds per project and per
 * destination host keep one tenant or one slow receiver from holding every slot; a free slot
 * starts the next buffered attempt that is within its bounds.
 */
export class Lane {
  #inFlight = 0;
  readonly #projects = new Map<number, number>();
  readonly #hosts = new Map<string, number>();
  // Claimed rows and fed jobs not started yet, by project and then by host, so that a free slot
  // skips a project or host at its bound in one step, however much of its work waits.
  readonly #buffer = new Map<number, Map<string, Buffered[]>>();
  #buffered = 0;
  readonly #batches = new Set<Promise<void>>();
  #stopping = false;
  #pumping = false;
  #again = false;
  #news = true;
  readonly #idle: Array<() => void> = [];
  readonly #kindKeys: KindKey[];
  /** Due rows may be waiting: set by news and by a project or host falling below its bound; a short claim clears it. */
  #rowsMayWait = true;
  /** Projects and hosts a claim of rows skipped as busy: the next attempt of one to end asks for a claim again. */
  readonly #rowSkipped = { projects: new Set<number>(), hosts: new Set<string>() };
  /** Projects a feeder's claim skipped as busy: the next attempt of one to end is news for the feeders. */
  readonly #fedSkipped = new Set<number>();

  constructor(
    readonly name: string,
    private readonly kinds: readonly JobKind[],
    private readonly feeders: readonly Feeder[],
    private readonly kindOf: (row: ClaimedRow) => JobKind | undefined,
    private readonly options: LaneOptions,
  ) {
    this.#kindKeys = kinds.map((k) => ({ kind: k.kind, deliveryKind: k.deliveryKind ?? '' }));
  }

  /** `news`: something was committed (a NOTIFY) or the poll timer fired, so recorded rows may wait. */
  wake(news = false): void {
    if (news) {
      this.#news = true;
      this.#rowsMayWait = true;
    }
    if (this.#stopping) return;
    this.#startBuffered();
    if (this.#pumping) {
      this.#again = true;
      return;
    }
    this.#pumping = true;
    this.#pumpRun = this.#pump().finally(() => {
      this.#pumping = false;
      if (this.#again) {
        this.#again = false;
        this.wake();
      }
    });
  }

  /** The pump running, if any: stop() waits for it, so that what its claim took is given back, not stranded. */
  #pumpRun: Promise<void> = Promise.resolve();

  /**
   * Attempts in flight plus buffered work, per project and per host: one whose bound this already
   * covers needs no more rows. Counting only attempts in flight, each claim leased a dead endpoint
   * more rows as soon as one of its attempts timed out, to buffer and give back unstarted. Buffered
   * work counts toward one bound only when the other lets it start (a project's rows held by a
   * dead host must not keep its rows for other hosts from being claimed, nor the reverse).
   */
  #load(): Load {
    const projects = new Map(this.#projects);
    const hosts = new Map(this.#hosts);
    for (const [project, byHost] of this.#buffer) {
      const projectFree = this.#projectFree(project);
      for (const [host, queue] of byHost) {
        if (this.#hostFree(host)) bump(projects, project, queue.length);
        if (host !== '' && projectFree) bump(hosts, host, queue.length);
      }
    }
    return { projects, hosts };
  }

  #busy(): { projects: number[]; hosts: string[] } {
    const { projects, hosts } = this.#load();
    return {
      projects: [...projects].filter(([, n]) => n >= this.options.projectConcurrency).map(([p]) => p),
      hosts: [...hosts].filter(([, n]) => n >= this.options.hostConcurrency).map(([h]) => h),
    };
  }

  #projectFree(project: number): boolean {
    return (this.#projects.get(project) ?? 0) < this.options.projectConcurrency;
  }

  #hostFree(host: string): boolean {
    return host === '' || (this.#hosts.get(host) ?? 0) < this.options.hostConcurrency;
  }

  /** Whether `key`, marked as skipped by a claim, is below its bound now (its mark then goes). */
  #belowBound<K>(marked: Set<K>, key: K, bound: number, of: (load: Load) => Map<K, number>): boolean {
    if (!marked.has(key) || (of(this.#load()).get(key) ?? 0) >= bound) return false;
    marked.delete(key);
    return true;
  }

  #push(b: Buffered): void {
    let hosts = this.#buffer.get(b.row.project_id);
    if (!hosts) this.#buffer.set(b.row.project_id, (hosts = new Map<string, Buffered[]>()));
    const key = b.host ?? '';
    const queue = hosts.get(key);
    if (queue) queue.push(b);
    else hosts.set(key, [b]);
    this.#buffered++;
  }

  /** Buffered work that could start now (its project and host within their bounds). */
  #ready(): number {
    let n = 0;
    for (const [project, hosts] of this.#buffer) {
      if (!this.#projectFree(project)) continue;
      for (const [host, queue] of hosts) if (this.#hostFree(host)) n += queue.length;
    }
    return n;
  }

  async #pump(): Promise<void> {
    const { concurrency, eventBatch } = this.options;
    const ahead = concurrency * 8;
    // Fed work first: its jobs are tried at once, and get rows only if they fail.
    // The news is taken before the claims: news that comes while one runs (a commit its snapshot
    // may not have seen) sets it again for the next round instead of being overwritten by a
    // short claim's answer.
    if (this.#news) {
      this.#news = false;
      for (const feeder of this.feeders) {
        for (;;) {
          if (this.#stopping || this.#buffered >= ahead) {
            this.#news = true;
            break;
          }
          let fed: FedBatch;
          try {
            const busy = this.#busy().projects;
            for (const p of busy) this.#fedSkipped.add(p);
            fed = await feeder.claim(eventBatch, this.options.leaseMs, busy);
          } catch (err) {
            this.#news = true;
            this.options.log.warn({ lane: this.name, err: err instanceof Error ? err.message : String(err) }, 'outbox feed failed');
            break;
          }
          if (fed.leased > 0) this.#inline(fed);
          if (fed.leased < eventBatch) break;
        }
      }
    }
    if (this.kinds.length === 0) return;
    // Claims run one at a time (this pump is single-flight) and ahead of need: rows wait in a
    // small local buffer, so a freed slot starts its next attempt at once, without a round trip.
    // Rows waiting for a busy project or host do not count as ahead, so others are still claimed.
    // A claim that comes back short means nothing more is due: the next one waits for news (a
    // NOTIFY, the poll timer) or for a project or host to come below its bound.
    while (this.#rowsMayWait) {
      this.#startBuffered();
      this.#releaseStale();
      const want = ahead - this.#inFlight - this.#ready();
      if (this.#stopping || want < concurrency * 2 || this.#buffered >= ahead * 4) return;
      this.#rowsMayWait = false;
      let rows: ClaimedRow[];
      try {
        const busy = this.#busy();
        for (const p of busy.projects) this.#rowSkipped.projects.add(p);
        for (const h of busy.hosts) this.#rowSkipped.hosts.add(h);
        const claim = {
          kinds: this.#kindKeys,
          limit: want,
          perGroup: this.options.projectConcurrency,
          leaseMs: this.options.leaseMs,
          busyProjects: busy.projects,
          busyHosts: busy.hosts,
          claimable: this.options.claimable,
        };
        rows = await claimDue(this.options.db, claim);
        await this.#prepare(rows);
      } catch (err) {
        this.#rowsMayWait = true;
        this.options.log.warn({ lane: this.name, err: err instanceof Error ? err.message : String(err) }, 'outbox poll failed');
        return;
      }
      const at = this.options.now();
      for (const row of rows) {
        const job = this.kindOf(row);
        if (job) this.#push({ row, job, host: row.destination ?? job.destination?.(row), at });
      }
      if (rows.length === want) this.#rowsMayWait = true;
    }
    this.#startBuffered();
  }

  /** Each kind loads what its claimed rows need in one query; rows of a failed load go back. */
  async #prepare(rows: ClaimedRow[]): Promise<void> {
    for (const kind of this.kinds) {
      const mine = rows.filter((r) => this.kindOf(r) === kind);
      if (mine.length === 0 || !kind.prepare) continue;
      try {
        await kind.prepare(mine);
      } catch (err) {
        await release(
          this.options.db,
          rows.map((r) => r.id),
        ).catch(() => undefined);
        throw err;
      }
    }
  }

  /** Queues a fed batch's jobs as attempts with no row of their own yet. */
  #inline(fed: FedBatch): void {
    const batch = new InlineBatch(fed, (b) => this.#finish(b));
    if (fed.jobs.length === 0) {
      this.#finish(batch);
      return;
    }
    const at = this.options.now();
    for (const row of fed.jobs) {
      const job = this.kindOf(row);
      if (!job) {
        batch.done(row, undefined);
        continue;
      }
      this.#push({ row, job, host: job.destination?.(row), at, inline: batch });
    }
    this.#startBuffered();
  }

  #finish(batch: InlineBatch): void {
    const finishing = batch.fed
      .finish(batch.outcomes)
      .catch((err: unknown) => {
        // The leases run out and another relay sends them again, with the same webhook-ids.
        this.options.log.warn({ lane: this.name, err: err instanceof Error ? err.message : String(err) }, 'fed batch not finished');
      })
      .finally(() => {
        for (const outcome of batch.outcomes.values()) if (outcome) this.#wakeWhenDue(outcome);
        this.#batches.delete(finishing);
        this.#checkIdle();
      });
    this.#batches.add(finishing);
  }

  /**
   * Starts buffered attempts while slots are free, project by project (a project that started
   * something goes to the back), skipping a project or host at its bound.
   */
  #startBuffered(): void {
    if (this.#stopping || this.#inFlight >= this.options.concurrency || this.#buffered === 0) return;
    for (const [project, hosts] of [...this.#buffer]) {
      if (this.#inFlight >= this.options.concurrency) return;
      if (!this.#projectFree(project)) continue;
      let started = false;
      for (const [host, queue] of hosts) {
        while (queue.length > 0 && this.#hostFree(host) && this.#projectFree(project) && this.#inFlight < this.options.concurrency) {
          this.#buffered--;
          this.#run(queue.shift() as Buffered);
          started = true;
        }
        if (queue.length === 0) hosts.delete(host);
      }
      if (hosts.size === 0) {
        this.#buffer.delete(project);
      } else if (started) {
        this.#buffer.delete(project);
        this.#buffer.set(project, hosts);
      }
    }
  }

  /** Takes every buffered item out that `stale` says is; what is left keeps its order. */
  #take(stale: (b: Buffered) => boolean): Buffered[] {
    const taken: Buffered[] = [];
    for (const [project, hosts] of this.#buffer) {
      for (const [host, queue] of hosts) {
        // Each queue is in arrival order: only one whose oldest item is stale is looked through.
        const head = queue[0];
        if (!head || !stale(head)) continue;
        const keep = queue.filter((b) => !stale(b));
        taken.push(...queue.filter(stale));
        if (keep.length > 0) hosts.set(host, keep);
        else hosts.delete(host);
      }
      if (hosts.size === 0) this.#buffer.delete(project);
    }
    this.#buffered -= taken.length;
    return taken;
  }

  /**
   * Gives back rows that waited in the buffer for a quarter of their lease (their project or host
   * stayed at its bound), well before the lease could run out and let another relay take them
   * too; fed jobs waiting longer than `inlineStartMs` are left to rows.
   */
  #releaseStale(): void {
    const now = this.options.now();
    const rowLimit = now - this.options.leaseMs / 4;
    const inlineLimit = now - this.options.inlineStartMs;
    const stale = this.#take((b) => (b.inline ? b.at < inlineLimit : b.at < rowLimit));
    if (stale.length === 0) return;
    for (const b of stale) b.inline?.done(b.row, undefined);
    const rows = stale.filter((b) => !b.inline).map((b) => b.row.id);
    if (rows.length > 0) void release(this.options.db, rows).catch(() => undefined);
  }

  /**
   * One attempt in a slot. The slot (and the project's and host's share) is free as soon as the
   * attempt ends; its outcome is recorded with others in the next settle statement. Until then the
   * row's lease keeps it from being claimed again.
   */
  #run(b: Buffered): void {
    const { row, host, inline } = b;
    this.#inFlight++;
    bump(this.#projects, row.project_id, 1);
    if (host !== undefined) bump(this.#hosts, host, 1);
    void (async () => {
      let outcome: Outcome | undefined;
      try {
        outcome = await b.job.handle(row);
      } catch (err) {
        // Not known to be done: a fed job gets a row, a row's lease runs out and it is tried again.
        this.options.log.warn({ outboxId: row.id, kind: row.kind, err: err instanceof Error ? err.message : String(err) }, 'outbox row not handled');
      }
      this.#inFlight--;
      const wasBusy = !this.#projectFree(row.project_id) || (host !== undefined && !this.#hostFree(host));
      bump(this.#projects, row.project_id, -1);
      if (host !== undefined) bump(this.#hosts, host, -1);
      // Its project's or host's rows were left unclaimed while it was at its bound (in flight, or
      // with its buffered work when a claim skipped it): claimed for once it is below it. One that
      // is still at its bound (its buffered work takes the slot) stays marked for its next end.
      const skippedProject = this.#belowBound(this.#rowSkipped.projects, row.project_id, this.options.projectConcurrency, (l) => l.projects);
      const skippedHost = host !== undefined && this.#belowBound(this.#rowSkipped.hosts, host, this.options.hostConcurrency, (l) => l.hosts);
      if (wasBusy || skippedProject || skippedHost) this.#rowsMayWait = true;
      if (this.#belowBound(this.#fedSkipped, row.project_id, this.options.projectConcurrency, (l) => l.projects)) this.#news = true;
      this.wake();
      if (outcome) count(row, outcome);
      if (inline) {
        inline.done(row, outcome);
      } else if (outcome) {
        try {
          await this.#settle(row.id, outcome);
          this.#wakeWhenDue(outcome);
        } catch (err) {
          this.options.log.warn({ outboxId: row.id, kind: row.kind, err: err instanceof Error ? err.message : String(err) }, 'outbox row not settled');
        }
      }
      this.#checkIdle();
    })();
  }

  /**
   * A row to be tried again sooner than the relay's next poll (an event waiting for an earlier one
   * of its stream, a retry due in seconds) is claimed when it is due, not at that poll. Called
   * once its outcome is recorded, so the row is due by the database's clock too. Later ones are
   * the poll's.
   */
  #wakeWhenDue(outcome: Outcome): void {
    if (outcome.retryInMs === null || outcome.retryInMs >= this.options.pollMs || this.#stopping) return;
    this.#due.add(this.options.now() + outcome.retryInMs);
    this.#armDue();
  }

  /** The timer for the earliest due time still ahead; each fire wakes the lane and arms the next. */
  #armDue(): void {
    const next = this.#due.first();
    if (next === undefined || this.#stopping || (this.#dueTimer !== undefined && this.#dueAt <= next)) return;
    clearTimeout(this.#dueTimer);
    this.#dueAt = next;
    this.#dueTimer = setTimeout(
      () => {
        this.#dueTimer = undefined;
        this.#due.dropUntil(this.options.now());
        // Rows fell due: a claim, not news for the feeders (nothing new was recorded).
        this.#rowsMayWait = true;
        this.wake();
        this.#armDue();
      },
      // At most a poll away: a clock set back wakes the lane once a poll, not in a loop.
      Math.min(this.options.pollMs, Math.max(0, next - this.options.now())),
    );
    this.#dueTimer.unref();
  }

  readonly #due = new DueTimes();
  #dueTimer: NodeJS.Timeout | undefined;
  #dueAt = 0;

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

  /** Stops claiming, gives back what was not started, waits for what is in flight. */
  async stop(): Promise<void> {
    this.#stopping = true;
    clearTimeout(this.#dueTimer);
    // A claim in flight ends first: what it took is in the buffer then, and given back below.
    await this.#pumpRun;
    const unstarted = this.#take(() => true);
    for (const b of unstarted) b.inline?.done(b.row, undefined);
    await release(
      this.options.db,
      unstarted.filter((b) => !b.inline).map((b) => b.row.id),
    ).catch(() => undefined);
    if (this.#inFlight > 0 || this.#toSettle.length > 0 || this.#settling || this.#batches.size > 0) {
      await new Promise<void>((resolve) => this.#idle.push(resolve));
    }
  }
}
