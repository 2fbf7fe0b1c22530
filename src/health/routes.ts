import type Router from '@koa/router';
import type { Knex } from 'knex';
import { AppError, DependencyUnavailableError } from '../errors.js';
import { databaseReachable } from '../db/health.js';
import type { AppState } from '../http/context.js';
import type { Lifecycle } from '../lifecycle.js';

/** Liveness and readiness, without auth (CONTRACT.md section 12). */
export function healthRoutes(router: Router<AppState>, db: Knex, lifecycle: Lifecycle): void {
  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });

  router.get('/readyz', async (ctx) => {
    if (lifecycle.draining) {
      throw new AppError(503, 'service_draining', 'Service Unavailable', 'The service is shutting down.', undefined, { 'Retry-After': '1' });
    }
    if (!(await databaseReachable(db, 2_000))) throw new DependencyUnavailableError('database');
    ctx.body = { status: 'ready', checks: { database: 'ok' } };
  });
}
