import type { Static } from '@sinclair/typebox';
import { FailedDeliveryList, type FailedDeliveryOut } from './schemas.js';
import { principalOf } from '../auth/access.js';
import type { Principal } from '../auth/principal.js';
import type { Executor } from '../db/knex.js';
import { NotFoundError } from '../errors.js';
import type { Page } from '../http/pagination.js';
import type { RouteDeps } from '../http/route-deps.js';
import { PageQuery, strictObject, Id } from '../http/schemas.js';
import { declareList, type Declaration } from '../http/declare.js';
import { listFailedDeliveries, type OutboxRow } from '../outbox/repository.js';
import { findProject } from '../projects/repository.js';
import * as ex from '../openapi/examples.js';

const Params = strictObject({ projectId: Id });
const Query = strictObject({ ...PageQuery });

function parsePayload(text: string | null): unknown {
  try {
    return text === null ? null : (JSON.parse(text) as unknown);
  } catch {
    return text;
  }
}

/** The failed-delivery record of CONTRACT.md section 8; `webhookId` is the subscription's id (null for wallet webhooks). */
export const presentFailedDelivery = (r: OutboxRow): Static<typeof FailedDeliveryOut> => ({
  id: r.id,
  kind: r.delivery_kind ?? 'wallet',
  webhookId: r.subscription_id,
  event: r.event,
  url: r.url,
  payload: parsePayload(r.payload),
  attempts: r.attempts,
  lastStatus: r.last_status,
  lastError: r.last_error,
  lastResponseBody: r.last_response_body,
  lastAttemptAt: r.last_attempt_at ? r.last_attempt_at.toISOString() : null,
  createdAt: r.created_at.toISOString(),
});

export async function failedDeliveriesOf(db: Executor, p: Principal, projectId: number, page: Page): Promise<OutboxRow[]> {
  if (!(await findProject(db, p, projectId))) throw new NotFoundError('No such project.');
  return listFailedDeliveries(db, projectId, page);
}

export function failedDeliveryEndpoints(_deps: RouteDeps): Declaration[] {
  return [
    declareList(
      { method: 'GET', path: '/api/v1/project/:projectId/webhooks/failedDeliveries', auth: 'apiToken' },
      {
        params: Params,
        query: Query,
        doc: {
          operationId: 'listFailedDeliveries',
          summary: "A project's failed deliveries",
          description:
            'Wallet webhooks (`kind: wallet`, `webhookId: null`) and subscription deliveries whose retries are exhausted, with the last status, error and response body.',
          tag: 'Webhooks',
          responses: {
            200: {
              description: 'A page of failed deliveries.',
              schema: FailedDeliveryList,
              example: { failedDeliveries: [ex.failedDelivery], nextCursor: null },
            },
          },
        },
      },
      async (ctx, { params, paging }) => {
        const projectId = Number(params.projectId);
        const result = paging.pageOf(await failedDeliveriesOf(ctx.state.db, principalOf(ctx), projectId, paging.page));
        ctx.body = { failedDeliveries: result.items.map(presentFailedDelivery), nextCursor: result.nextCursor };
      },
    ),
  ];
}
