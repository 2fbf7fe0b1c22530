import type Router from '@koa/router';
import type { Knex } from 'knex';
import { AppError, DependencyUnavailableError } from '../errors.js';
import { databaseReachable } from '../db/health.js';
import type { AppState } from '../http/context.js';
import type { Lifecycle } from '../lifecycle.js';
import type { SignerClient } from '../signer/client.js';
import { registry } from '../metrics.js';

/** Liveness and readiness, without auth (CONTRACT.md section 12). */
export function healthRoutes(router: Router<AppState>, db: Knex, signer: SignerClient, lifecycle: Lifecycle): void {
  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });

  router.get('/readyz', async (ctx) => {
    if (lifecycle.draining) {
      throw new AppError(503, 'service_draining', 'Service Unavailable', 'The service is shutting down.', undefined, { 'Retry-After': '1' });
    }
    const [database, signerHealth] = await Promise.all([databaseReachable(db, 2_000), signer.health()]);
    if (!database) throw new DependencyUnavailableError('database');
    if (!signerHealth.ok) throw new DependencyUnavailableError(signerHealth.sealed ? 'signer (Vault is sealed)' : 'signer');
    ctx.body = { status: 'ready', checks: { database: 'ok', signer: 'ok' } };
  });

  // Prometheus text; meant for the cluster's scraper, not routed by the chart's Ingress.
  router.get('/metrics', async (ctx) => {
    ctx.body = await registry.metrics();
    ctx.type = registry.contentType;
  });
}
