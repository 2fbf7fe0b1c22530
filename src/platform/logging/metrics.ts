import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Prometheus metrics of this process (`GET /metrics` on the API and the worker). One registry per
 * process; the outbox depth is read from the database when scraped.
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

type DepthReader = () => Promise<Array<{ kind: string; status: string; n: number }>>;
let depthSource: DepthReader | undefined;
let credentialSource: (() => Promise<number | null | undefined>) | undefined;

/** What the signer-credential gauge reads at scrape time (the signer's health). */
export function bindSignerCredential(read: () => Promise<number | null | undefined>): void {
  credentialSource = read;
}

new Gauge({
  name: 'custody_signer_vault_credential_expiry_timestamp_seconds',
  help: "When the signer's AppRole secret id expires (Unix time), read from Vault at scrape time; absent when it never expires or cannot be read. Alert days before.",
  registers: [registry],
  async collect() {
    this.reset();
    const at = await credentialSource?.().catch(() => undefined);
    if (typeof at === 'number') this.set(at);
  },
});

/** What the outbox depth gauge reads at scrape time (platform/outbox/repository.ts outboxDepth). */
export function bindOutboxDepth(read: DepthReader): void {
  depthSource = read;
}

new Gauge({
  name: 'custody_outbox_depth',
  help: 'Outbox rows not done yet, by kind and status (pending, failed), read at scrape time.',
  labelNames: ['kind', 'status'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    if (!depthSource) return;
    try {
      for (const r of await depthSource()) this.set({ kind: r.kind, status: r.status }, r.n);
    } catch {
      // The database is down: the gauge is left empty rather than failing the scrape.
    }
  },
});
