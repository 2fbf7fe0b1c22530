import type { Knex } from 'knex';
import { AppError } from '../../platform/http/errors.js';
import { checkReadiness } from '../../platform/health/readiness.js';
import { declarePlain, type Declaration } from '../../access/endpoints/declare.js';
import type { Lifecycle } from '../../platform/runtime/lifecycle.js';
import type { SignerClient } from '../../platform/signer/client.js';
import type { AppEnv } from '../../platform/config/config.js';
import { registry } from '../../platform/logging/metrics.js';
import { Type } from '@sinclair/typebox';
import type { OperationDoc } from '../../platform/openapi/meta.js';

/** Liveness and readiness, without auth (docs/interface.md section 12). */
export function healthEndpoints(db: Knex, signer: SignerClient, lifecycle: Lifecycle, appEnv: AppEnv): Declaration[] {
  const live = declarePlain(
    { method: 'GET', path: '/healthz' },
    {
      operationId: 'getHealth',
      summary: 'Liveness: the process answers',
      tag: 'Operations',
      plain: true,
      responses: {
        200: { description: 'Alive.', schema: Type.Object({ status: Type.Literal('ok') }, { additionalProperties: false }), example: { status: 'ok' } },
      },
    },
    (ctx) => {
      ctx.body = { status: 'ok' };
    },
  );

  const Ready = Type.Object(
    {
      status: Type.Literal('ready'),
      checks: Type.Object(
        {
          database: Type.Literal('ok'),
          signer: Type.Literal('ok'),
          keyStore: Type.Union([Type.Literal('ok'), Type.Literal('sealed'), Type.Literal('unavailable')], {
            description:
              "The signer's key store (Vault). Not part of readiness: while it is sealed or unreachable only key creation answers 503 with Retry-After.",
          }),
        },
        { additionalProperties: false },
      ),
    },
    { additionalProperties: false },
  );
  const readyDoc: OperationDoc = {
    operationId: 'getReadiness',
    summary: 'Readiness: the database and the signer process answer',
    description:
      "What every endpoint needs. Vault's seal state is reported (`keyStore`) but does not make the service unready: a sealed Vault stops only the endpoints that create keys.",
    tag: 'Operations',
    plain: true,
    errors: {
      503: 'service_draining (shutting down) or dependency_unavailable (database, signer process, or, with APP_ENV=production, a signer on the development key store).',
    },
    responses: { 200: { description: 'Ready.', schema: Ready, example: { status: 'ready', checks: { database: 'ok', signer: 'ok', keyStore: 'ok' } } } },
  };
  const ready = declarePlain({ method: 'GET', path: '/readyz' }, readyDoc, async (ctx) => {
    if (lifecycle.draining) {
      throw new AppError(503, 'service_draining', 'Service Unavailable', 'The service is shutting down.', undefined, { 'Retry-After': '1' });
    }
    const { keyStore } = await checkReadiness(db, signer, appEnv);
    ctx.body = { status: 'ready', checks: { database: 'ok', signer: 'ok', keyStore } };
  });

  // Prometheus text; meant for the cluster's scraper, not routed by the chart's Ingress.
  const metricsDoc: OperationDoc = {
    operationId: 'getMetrics',
    summary: 'Prometheus metrics',
    description:
      'HTTP requests and durations by route, outbox depth and ages, webhook delivery outcomes and the oldest failing delivery, signer calls and health, identity-provider fetches, JWT key-cache hits, the database pool (docs/operations.md, Metrics).',
    tag: 'Operations',
    plain: true,
    responses: { 200: { description: 'Prometheus text exposition format.', schema: Type.String(), contentType: 'text/plain' } },
  };
  const metrics = declarePlain({ method: 'GET', path: '/metrics' }, metricsDoc, async (ctx) => {
    ctx.body = await registry.metrics();
    ctx.type = registry.contentType;
  });
  return [live, ready, metrics];
}
