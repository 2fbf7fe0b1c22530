import type { Static } from '@sinclair/typebox';
import { FailedDeliveryList, type FailedDeliveryOut } from './schemas.js';
import type { RouteDeps } from '../../access/endpoints/route-deps.js';
import { PageQuery, strictObject, Id } from '../../platform/http/schemas.js';
import { atProject, declareList, type Declaration } from '../../access/endpoints/declare.js';
import type { OutboxRow } from '../../platform/outbox/repository.js';
import { failedDeliveriesOf } from './commands.js';
import * as ex from '../../platform/openapi/examples.js';

const Params = strictObject({ projectId: Id });
const Query = strictObject({ ...PageQuery });

function parsePayload(text: string | null): unknown {
  try {
    return text === null ? null : (JSON.parse(text) as unknown);
  } catch {
    return text;
  }
}

/** The failed-delivery record of docs/interface.md section 8; `webhookId` is the subscription's id (null for wallet webhooks). */
export const presentFailedDelivery = (r: OutboxRow): Static<typeof FailedDeliveryOut> => ({
  id: r.id,
  kind: r.delivery_kind === 'subscription' ? 'subscription' : 'wallet',
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

export function failedDeliveryEndpoints(_deps: RouteDeps): Declaration[] {
  return [
    declareList(
      {
        method: 'GET',
        path: '/api/v1/project/:projectId/webhooks/failedDeliveries',
        ...atProject('delivery.read'),
      },
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
      async (ctx, { scope, paging }) => {
        const result = paging.pageOf(await failedDeliveriesOf(ctx.state.db, scope, paging.page));
        ctx.body = { failedDeliveries: result.items.map(presentFailedDelivery), nextCursor: result.nextCursor };
      },
    ),
  ];
}
