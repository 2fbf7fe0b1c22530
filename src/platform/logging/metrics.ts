import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Prometheus metrics of this process (`GET /metrics` on the API and the worker). One registry per
 * process; the gauges of the outbox, the signer's health and the database pool are read when
 * scraped, from the sources src/programs/assembly.ts binds. Every metric is in the table of
 * docs/operations.md ("Metrics"), which the alerting suite holds to what /metrics serves.
 */
export const registry = new Registry();
collectDefaultMetrics({ register: registry, prefix: 'custody_' });

export const httpRequests = new Counter({
  name: 'custody_http_requests_total',
  help: 'HTTP requests answered, by method, route pattern and status.',
  labelNames: ['method', 'route', 'status'] as const,
  registers: [registry],
});

export const httpDuration = new Histogram({
  name: 'custody_http_request_duration_seconds',
  help: 'Time to answer HTTP requests, by method and route pattern.',
  labelNames: ['method', 'route'] as const,
  buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
  registers: [registry],
});

export const signerCalls = new Counter({
  name: 'custody_signer_calls_total',
  help: 'Calls to the signer, by operation and outcome (ok; for signing also denied by policy and refused as unreadable; unavailable, error).',
  labelNames: ['operation', 'outcome'] as const,
  registers: [registry],
});

export const signerDuration = new Histogram({
  name: 'custody_signer_call_duration_seconds',
  help: 'Duration of calls to the signer, by operation.',
  labelNames: ['operation'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
  registers: [registry],
});

export const jwtKeyCache = new Counter({
  name: 'custody_jwt_key_cache_total',
  help: "Look-ups of an issuer's discovery document and key set: hit (cached) or miss (fetched).",
  labelNames: ['result'] as const,
  registers: [registry],
});

export const deliveries = new Counter({
  name: 'custody_webhook_deliveries_total',
  help: 'Webhook delivery attempts settled by this relay, by kind (wallet, subscription) and outcome (delivered, retry, failed, dropped).',
  labelNames: ['kind', 'outcome'] as const,
  registers: [registry],
});

export const outboxWork = new Counter({
  name: 'custody_outbox_rows_total',
  help: 'Outbox rows handled by this relay, by kind (wallet.create, delivery) and outcome (done, retry, failed).',
  labelNames: ['kind', 'outcome'] as const,
  registers: [registry],
});

export const eventsFannedOut = new Counter({
  name: 'custody_events_fanned_out_total',
  help: 'Recorded event rows fanned out to subscriptions by this relay, and the deliveries created.',
  labelNames: ['what'] as const,
  registers: [registry],
});

export const idpFetches = new Counter({
  name: 'custody_idp_fetches_total',
  help: "Fetches of identity providers' discovery documents and key sets, by document (discovery, jwks) and outcome (ok; unreachable, http_status, invalid).",
  labelNames: ['document', 'outcome'] as const,
  registers: [registry],
});

/** How long a scrape waits for a read: an exhausted pool must not stall the scrape that shows it. */
const SCRAPE_READ_MS = 2_000;

/**
 * One read shared by every gauge of a scrape: prom-client starts the collectors together, so the
 * first starts the read and the others wait for the same answer. `slow`: what a read that takes
 * longer than SCRAPE_READ_MS stands for (default: nothing known).
 */
function perScrape<T>(slow?: T): { bind(read: () => Promise<T>): void; get(): Promise<T | undefined> } {
  let source: (() => Promise<T>) | undefined;
  let inFlight: Promise<T | undefined> | undefined;
  return {
    bind: (read) => {
      source = read;
    },
    get: () => {
      if (!source) return Promise.resolve(undefined);
      if (inFlight) return inFlight;
      let timer: NodeJS.Timeout | undefined;
      // A failed or slow read (the database or the signer down) never fails the scrape.
      inFlight = Promise.race([
        source().catch(() => undefined),
        new Promise<T | undefined>((resolve) => {
          timer = setTimeout(() => resolve(slow), SCRAPE_READ_MS).unref();
        }),
      ]).finally(() => {
        clearTimeout(timer);
        inFlight = undefined;
      });
      return inFlight;
    },
  };
}

/**
 * Sets an unlabelled gauge, or leaves it out of the scrape when there is no value: prom-client's
 * reset() gives such a gauge a 0, which would read as "down" or "expired at 1970".
 */
function setOrAbsent(gauge: Gauge, value: number | undefined): void {
  gauge.reset();
  if (value === undefined) gauge.remove();
  else gauge.set(value);
}

/** The signer's health as its gauges read it (platform/signer/client.ts SignerHealth). */
export interface SignerHealthView {
  reachable: boolean;
  ok: boolean;
  credentialExpiresAt?: number | null;
}

// A signer that does not answer within the scrape's wait is down as far as the callers can tell.
const signerHealth = perScrape<SignerHealthView>({ reachable: false, ok: false });

/** What the signer's gauges read at scrape time: its health, one call per scrape. */
export function bindSignerHealth(read: () => Promise<SignerHealthView>): void {
  signerHealth.bind(read);
}

/** A gauge of one figure of the signer's health, absent when the scrape got no answer. */
const signerGauge = (name: string, help: string, pick: (h: SignerHealthView) => number | undefined) =>
  new Gauge({
    name,
    help,
    registers: [registry],
    async collect() {
      const h = await signerHealth.get();
      setOrAbsent(this, h && pick(h));
    },
  });
signerGauge('custody_signer_up', 'Whether the signer answered its health check and took our credentials (1) or not (0), read at scrape time.', (h) =>
  h.reachable ? 1 : 0,
);
signerGauge(
  'custody_signer_key_store_up',
  "Whether the signer's key store is usable (1: Vault reachable and unsealed, or the local store) or not (0), read at scrape time.",
  (h) => (h.ok ? 1 : 0),
);
signerGauge(
  'custody_signer_vault_credential_expiry_timestamp_seconds',
  "When the signer's AppRole secret id expires (Unix time), read from Vault at scrape time; absent when it never expires or cannot be read. Alert days before.",
  (h) => (typeof h.credentialExpiresAt === 'number' ? h.credentialExpiresAt : undefined),
);

/** The outbox as its gauges read it at scrape time (platform/outbox/repository.ts outboxGauges). */
export interface OutboxView {
  depth: Array<{ kind: string; status: string; n: number }>;
  /** By kind: seconds the oldest due row has waited (0: none due). */
  dueAge: Array<{ kind: string; seconds: number }>;
  /** By delivery kind: seconds since the oldest delivery still retrying after a failed attempt was queued. */
  failingDeliveryAge: Array<{ kind: string; seconds: number }>;
}

const outbox = perScrape<OutboxView>();

/** What the outbox gauges read at scrape time: one statement per scrape. */
export function bindOutbox(read: () => Promise<OutboxView>): void {
  outbox.bind(read);
}

new Gauge({
  name: 'custody_outbox_depth',
  help: 'Outbox rows not done yet, by kind and status (pending, failed), read at scrape time.',
  labelNames: ['kind', 'status'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    for (const r of (await outbox.get())?.depth ?? []) this.set({ kind: r.kind, status: r.status }, r.n);
  },
});

new Gauge({
  name: 'custody_outbox_oldest_due_age_seconds',
  help: "How long the oldest pending outbox row of each kind has been due without being done (events: since recorded, until fanned out; a deleted organisation's rows are not counted), read at scrape time; 0 when none is due. Grows when the relays are stuck.",
  labelNames: ['kind'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    for (const r of (await outbox.get())?.dueAge ?? []) this.set({ kind: r.kind }, r.seconds);
  },
});

new Gauge({
  name: 'custody_webhook_oldest_failing_delivery_age_seconds',
  help: 'Age of the oldest webhook delivery still being retried after a failed attempt, by kind (wallet, subscription), read at scrape time; 0 when none. Hours: a receiver has failed for hours.',
  labelNames: ['kind'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    for (const r of (await outbox.get())?.failingDeliveryAge ?? []) this.set({ kind: r.kind }, r.seconds);
  },
});

/** knex's connection pool (tarn) as its gauges read it. */
export interface PoolView {
  used: number;
  idle: number;
  max: number;
  pendingAcquires: number;
  shareWaits: number;
}

let poolSource: (() => PoolView | undefined) | undefined;

/** What the database pool gauges read at scrape time. */
export function bindDbPool(read: () => PoolView | undefined): void {
  poolSource = read;
}

const poolGauge = (name: string, help: string, field: keyof PoolView) =>
  new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      setOrAbsent(this, poolSource?.()?.[field]);
    },
  });
poolGauge('custody_db_pool_connections_in_use', "Connections of this process's database pool lent out, read at scrape time.", 'used');
poolGauge('custody_db_pool_connections_idle', "Idle connections of this process's database pool, read at scrape time.", 'idle');
poolGauge('custody_db_pool_connections_max', "The size limit of this process's database pool (DB_POOL_MAX).", 'max');
poolGauge('custody_db_pool_acquires_pending', "Queries waiting for a connection of this process's database pool, read at scrape time.", 'pendingAcquires');
poolGauge(
  'custody_db_pool_share_waits_pending',
  "Queries waiting because their tenant holds its share of this process's database pool (platform/db/share.ts), read at scrape time.",
  'shareWaits',
);
