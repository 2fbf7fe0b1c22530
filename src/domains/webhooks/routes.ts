import { EVENT_CATALOGUE } from './catalogue.js';
import type { RouteDeps } from '../../access/endpoints/route-deps.js';
import { queryBool } from '../../platform/http/schemas.js';
import { atDeployment, atProject, declare, declareList, type Declaration } from '../../access/endpoints/declare.js';
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
  EventCatalogueOut,
  ListWebhooksQuery,
  ProjectWebhooksParams,
  RetryAccepted,
  RotateWebhookSecretBody,
  SecretOut,
  SubscriptionCreated,
  SubscriptionList,
  SubscriptionOut,
  TestSent,
  UpdateWebhookBody,
  WebhookParams,
} from './schemas.js';
import * as ex from '../../platform/openapi/examples.js';

/** Project webhook subscriptions (docs/interface.md section 8) and the event catalogue (section 9). */
export function webhookEndpoints({ config, secretBox, now }: RouteDeps): Declaration[] {
  const deps: WebhookDeps = {
    env: config.appEnv,
    egress: { allow: config.egressAllowPrivate },
    secretBox,
    maxSubscriptions: config.webhookSubscriptionsPerProject,
  };

  return [
    declare(
      { method: 'GET', path: '/api/v1/webhooks/events', ...atDeployment('webhook.catalogue') },
      {
        doc: {
          operationId: 'listEventTypes',
          summary: 'The event catalogue',
          description: 'The events a subscription may name (section 9).',
          tag: 'Webhooks',
          responses: {
            200: {
              description: 'Every event type.',
              schema: EventCatalogueOut,
              example: { events: [{ name: 'wallet.created', description: 'A wallet was created.', data: 'the wallet-created payload' }] },
            },
          },
        },
      },
      (ctx) => {
        ctx.body = { events: EVENT_CATALOGUE };
        return Promise.resolve();
      },
    ),

    declareList(
      {
        method: 'GET',
        path: '/api/v1/project/:projectId/webhooks',
        ...atProject('webhook.read'),
      },
      {
        params: ProjectWebhooksParams,
        query: ListWebhooksQuery,
        doc: {
          operationId: 'listWebhooks',
          summary: "List a project's webhook subscriptions",
          tag: 'Webhooks',
          responses: { 200: { description: 'A page of subscriptions.', schema: SubscriptionList, example: { webhooks: [ex.subscription], nextCursor: null } } },
        },
      },
      async (ctx, { scope, query, paging }) => {
        const showDeleted = queryBool(query.showDeleted);
        const result = paging.pageOf(await listProjectSubscriptions(ctx.state.db, scope, paging.page, showDeleted));
        ctx.body = { webhooks: result.items.map(presentSubscription), nextCursor: result.nextCursor };
      },
    ),

    declare(
      {
        method: 'POST',
        path: '/api/v1/project/:projectId/webhooks',
        ...atProject('webhook.write'),
        write: { idempotent: true, target: { answer: 'id' } },
      },
      {
        params: ProjectWebhooksParams,
        body: CreateWebhookBody,
        doc: {
          operationId: 'createWebhook',
          summary: 'Subscribe a URL to events',
          description:
            'https only in production, never a private, loopback or metadata address there (checked now and at every connection). Without `secret` a `whsec_` secret is generated and shown once.',
          tag: 'Webhooks',
          requestExample: { url: 'https://api.example.com/hooks/custody', events: ['membership.issued', 'membership.revoked'] },
          errors: { 409: 'subscription_limit: the project has WEBHOOK_SUBSCRIPTIONS_PER_PROJECT (default 50) live subscriptions; delete one first.' },
          responses: {
            201: { description: 'Created.', schema: SubscriptionCreated, example: { ...ex.subscription, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' } },
          },
        },
      },
      async (ctx, { scope, body }) => {
        const { subscription, generatedSecret } = await createSubscription(ctx.state.db, scope, deps, body);
        ctx.status = 201;
        ctx.body = { ...presentSubscription(subscription), ...(generatedSecret === undefined ? {} : { secret: generatedSecret }) };
      },
    ),

    declare(
      {
        method: 'GET',
        path: '/api/v1/project/:projectId/webhooks/:webhookId',
        ...atProject('webhook.read'),
      },
      {
        params: WebhookParams,
        doc: {
          operationId: 'getWebhook',
          summary: 'Get a webhook subscription',
          tag: 'Webhooks',
          responses: { 200: { description: 'The subscription (never its secret).', schema: SubscriptionOut, example: ex.subscription } },
        },
      },
      async (ctx, { scope, params }) => {
        ctx.body = presentSubscription(await getSubscription(ctx.state.db, scope, Number(params.webhookId)));
      },
    ),

    declare(
      {
        method: 'PUT',
        path: '/api/v1/project/:projectId/webhooks/:webhookId',
        ...atProject('webhook.write'),
        write: { idempotent: false, target: { param: 'webhookId' } },
      },
      {
        params: WebhookParams,
        body: UpdateWebhookBody,
        doc: {
          operationId: 'updateWebhook',
          summary: 'Change a webhook subscription',
          description: 'Only what is given changes; any update re-enables a disabled subscription.',
          tag: 'Webhooks',
          requestExample: { events: ['*'] },
          responses: { 200: { description: 'The changed subscription.', schema: SubscriptionOut, example: ex.subscription } },
        },
      },
      async (ctx, { scope, params, body }) => {
        const sub = await changeSubscription(ctx.state.db, scope, deps, Number(params.webhookId), body);
        ctx.body = presentSubscription(sub);
      },
    ),

    declare(
      {
        method: 'DELETE',
        path: '/api/v1/project/:projectId/webhooks/:webhookId',
        ...atProject('webhook.write'),
        write: { idempotent: false, target: { param: 'webhookId' } },
      },
      {
        params: WebhookParams,
        doc: {
          operationId: 'deleteWebhook',
          summary: 'Delete a webhook subscription',
          description: 'Soft: nothing more is delivered to it.',
          tag: 'Webhooks',
          responses: { 204: { description: 'Deleted.' } },
        },
      },
      async (ctx, { scope, params }) => {
        await deleteSubscription(ctx.state.db, scope, Number(params.webhookId), now);
        ctx.status = 204;
      },
    ),

    declare(
      {
        method: 'POST',
        path: '/api/v1/project/:projectId/webhooks/:webhookId/secret',
        ...atProject('webhook.write'),
        write: { idempotent: true, target: { param: 'webhookId' } },
      },
      {
        params: WebhookParams,
        body: RotateWebhookSecretBody,
        doc: {
          operationId: 'rotateWebhookSecret',
          summary: "Rotate a subscription's secret",
          description: 'The given or a generated secret, shown once; for 24 h deliveries carry a signature with each secret.',
          tag: 'Webhooks',
          responses: { 200: { description: 'The new secret.', schema: SecretOut, example: { secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' } } },
        },
      },
      async (ctx, { scope, params, body }) => {
        const secret = await rotateSubscriptionSecret(ctx.state.db, scope, deps, Number(params.webhookId), body, now());
        ctx.body = { secret };
      },
    ),

    declare(
      {
        method: 'POST',
        path: '/api/v1/project/:projectId/webhooks/:webhookId/test',
        ...atProject('webhook.write'),
        write: { idempotent: true, target: { param: 'webhookId' } },
      },
      {
        params: WebhookParams,
        doc: {
          operationId: 'testWebhook',
          summary: 'Send a webhook.test event to the subscription',
          tag: 'Webhooks',
          responses: {
            202: {
              description: 'Queued for delivery.',
              schema: TestSent,
              example: { status: 'accepted', event: 'webhook.test', deliveryId: 322, webhookId: 'msg_2b9c7f1e0a6d4c1e' },
            },
          },
        },
      },
      async (ctx, { scope, params }) => {
        const sent = await testSubscription(ctx.state.db, scope, Number(params.webhookId), now());
        ctx.status = 202;
        ctx.body = { status: 'accepted', event: 'webhook.test', ...sent };
      },
    ),

    declare(
      {
        method: 'POST',
        path: '/api/v1/project/:projectId/webhooks/failedDeliveries/:deliveryId/retry',
        ...atProject('delivery.retry'),
        write: { idempotent: true, target: { answer: 'id' } },
      },
      {
        params: DeliveryParams,
        doc: {
          operationId: 'retryFailedDelivery',
          summary: 'Retry a failed delivery once',
          description: 'One more attempt; if it fails the delivery is listed as failed again.',
          tag: 'Webhooks',
          errors: { 409: 'conflict: the delivery is not failed (delivered or pending).' },
          responses: { 202: { description: 'Queued.', schema: RetryAccepted, example: { id: 321, status: 'pending' } } },
        },
      },
      async (ctx, { scope, params }) => {
        const row = await retryFailedDelivery(ctx.state.db, scope, Number(params.deliveryId));
        ctx.status = 202;
        ctx.body = { id: row.id, status: 'pending' };
      },
    ),
  ];
}
