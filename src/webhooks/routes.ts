import type Router from '@koa/router';
import { principalOf } from '../auth/access.js';
import { EVENT_CATALOGUE } from '../events/catalogue.js';
import type { AppState } from '../http/context.js';
import type { RouteDeps } from '../http/route-deps.js';
import { queryBool } from '../http/schemas.js';
import { endpoint } from '../http/validate.js';
import {
  changeSubscription,
  createSubscription,
  deleteSubscription,
  getSubscription,
  listProjectSubscriptions,
  retryFailedDelivery,
  rotateSubscriptionSecret,
  testSubscription,
  type WebhookDeps,
} from './commands.js';
import { presentSubscription } from './presenter.js';
import {
  CreateWebhookBody,
  DeliveryParams,
  ListWebhooksQuery,
  ProjectWebhooksParams,
  RotateWebhookSecretBody,
  UpdateWebhookBody,
  WebhookParams,
} from './schemas.js';

/** Project webhook subscriptions (CONTRACT.md section 8) and the event catalogue (section 9). */
export function webhookRoutes(router: Router<AppState>, { authenticate, audited, idempotent, cursors, config, secretBox, now }: RouteDeps): void {
  const deps: WebhookDeps = { env: config.appEnv, egress: { restrict: config.appEnv === 'production', allow: config.egressAllowPrivate }, secretBox };
  const base = '/api/v1/project/:projectId/webhooks';

  router.get(
    '/api/v1/webhooks/events',
    authenticate,
    endpoint({}, (ctx) => {
      principalOf(ctx);
      ctx.body = { events: EVENT_CATALOGUE };
      return Promise.resolve();
    }),
  );

  router.get(
    base,
    authenticate,
    endpoint({ params: ProjectWebhooksParams, query: ListWebhooksQuery }, async (ctx, { params, query }) => {
      const projectId = Number(params.projectId);
      const showDeleted = queryBool(query.showDeleted);
      const list = `webhooks:${projectId}:${showDeleted}`;
      const page = cursors.page(list, query);
      const result = cursors.result(list, page, await listProjectSubscriptions(ctx.state.db, principalOf(ctx), projectId, page, showDeleted));
      ctx.body = { webhooks: result.items.map(presentSubscription), nextCursor: result.nextCursor };
    }),
  );

  router.post(
    base,
    authenticate,
    idempotent,
    audited,
    endpoint({ params: ProjectWebhooksParams, body: CreateWebhookBody }, async (ctx, { params, body }) => {
      const { subscription, generatedSecret } = await createSubscription(ctx.state.db, principalOf(ctx), deps, Number(params.projectId), body);
      ctx.status = 201;
      ctx.body = { ...presentSubscription(subscription), ...(generatedSecret === undefined ? {} : { secret: generatedSecret }) };
    }),
  );

  router.get(
    `${base}/:webhookId`,
    authenticate,
    endpoint({ params: WebhookParams }, async (ctx, { params }) => {
      ctx.body = presentSubscription(await getSubscription(ctx.state.db, principalOf(ctx), Number(params.projectId), Number(params.webhookId)));
    }),
  );

  router.put(
    `${base}/:webhookId`,
    authenticate,
    audited,
    endpoint({ params: WebhookParams, body: UpdateWebhookBody }, async (ctx, { params, body }) => {
      const sub = await changeSubscription(ctx.state.db, principalOf(ctx), deps, Number(params.projectId), Number(params.webhookId), body);
      ctx.body = presentSubscription(sub);
    }),
  );

  router.delete(
    `${base}/:webhookId`,
    authenticate,
    audited,
    endpoint({ params: WebhookParams }, async (ctx, { params }) => {
      await deleteSubscription(ctx.state.db, principalOf(ctx), Number(params.projectId), Number(params.webhookId));
      ctx.status = 204;
    }),
  );

  router.post(
    `${base}/:webhookId/secret`,
    authenticate,
    idempotent,
    audited,
    endpoint({ params: WebhookParams, body: RotateWebhookSecretBody }, async (ctx, { params, body }) => {
      const secret = await rotateSubscriptionSecret(ctx.state.db, principalOf(ctx), deps, Number(params.projectId), Number(params.webhookId), body, now());
      ctx.body = { secret };
    }),
  );

  router.post(
    `${base}/:webhookId/test`,
    authenticate,
    idempotent,
    audited,
    endpoint({ params: WebhookParams }, async (ctx, { params }) => {
      const sent = await testSubscription(ctx.state.db, principalOf(ctx), Number(params.projectId), Number(params.webhookId), now());
      ctx.status = 202;
      ctx.body = { status: 'accepted', event: 'webhook.test', ...sent };
    }),
  );

  router.post(
    `${base}/failedDeliveries/:deliveryId/retry`,
    authenticate,
    idempotent,
    audited,
    endpoint({ params: DeliveryParams }, async (ctx, { params }) => {
      const row = await retryFailedDelivery(ctx.state.db, principalOf(ctx), Number(params.projectId), Number(params.deliveryId));
      ctx.status = 202;
      ctx.body = { id: row.id, status: 'pending' };
    }),
  );
}
