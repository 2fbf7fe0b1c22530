import type { ClaimedRow, Outcome, OutboxRow } from './repository.js';

/**
 * One kind of outbox work, registered by the domain that owns it (wallets/ registers wallet
 * creation, webhooks/ the deliveries): the outbox itself knows none of them.
 */
export interface JobKind {
  /** The rows it handles: their `kind`, and `delivery_kind` where one kind has several. */
  readonly kind: OutboxRow['kind'];
  readonly deliveryKind?: NonNullable<OutboxRow['delivery_kind']>;
  /** The lane it runs in: each lane has its own slots, so one lane's traffic never delays another's. */
  readonly lane: string;
  /** Loads what a batch of claimed rows needs in one query (`row.context`), so attempts make none. */
  prepare?(rows: ClaimedRow[]): Promise<void>;
  /** The host an attempt goes to, for the per-host bound; undefined when it goes to none. */
  destination?(row: ClaimedRow): string | undefined;
  handle(row: ClaimedRow): Promise<Outcome>;
}

/** Jobs that arrive in batches of recorded rows (events), split by the domain that knows them. */
export interface FedBatch {
  /** Recorded rows leased: fewer than asked for means none are waiting. */
  readonly leased: number;
  /** One job per delivery, tried at once, without a row of its own (id 0). */
  readonly jobs: ClaimedRow[];
  /** Every job has an outcome (undefined: not tried in time); records what is left to do. */
  finish(outcomes: ReadonlyMap<ClaimedRow, Outcome | undefined>): Promise<void>;
}

export interface Feeder {
  readonly lane: string;
  /** Leases up to `limit` recorded rows, skipping projects at their bound in this lane. */
  claim(limit: number, leaseMs: number, busyProjects: readonly number[]): Promise<FedBatch>;
}

/**
 * The lanes of the outbox: each has its own slots, so one lane's traffic never delays another's.
 * Wallet creation and its webhook share one; subscription traffic has the other.
 */
export const LANES = { wallets: 'wallets', webhooks: 'webhooks' } as const;

const keyOf = (kind: string, deliveryKind: string | null | undefined): string => `${kind}:${deliveryKind ?? ''}`;

/** The job kinds and feeders of one process, gathered by its assembly (src/programs/assembly.ts). */
export class OutboxRegistry {
  readonly #kinds = new Map<string, JobKind>();
  readonly #feeders: Feeder[] = [];

  register(job: JobKind): this {
    const key = keyOf(job.kind, job.deliveryKind);
    if (this.#kinds.has(key)) throw new Error(`outbox job kind ${key} registered twice`);
    this.#kinds.set(key, job);
    return this;
  }

  feed(feeder: Feeder): this {
    this.#feeders.push(feeder);
    return this;
  }

  kindOf(row: Pick<OutboxRow, 'kind' | 'delivery_kind'>): JobKind | undefined {
    return this.#kinds.get(keyOf(row.kind, row.delivery_kind));
  }

  lanes(): string[] {
    return [...new Set([...[...this.#kinds.values()].map((k) => k.lane), ...this.#feeders.map((f) => f.lane)])];
  }

  kindsIn(lane: string): JobKind[] {
    return [...this.#kinds.values()].filter((k) => k.lane === lane);
  }

  feedersIn(lane: string): Feeder[] {
    return this.#feeders.filter((f) => f.lane === lane);
  }
}
