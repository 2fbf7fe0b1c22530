import { Type } from '@sinclair/typebox';
import { EVENT_TYPES } from './catalogue.js';
import { Id, IdOut, NullableTimestamp, pageOf, PageQuery, QueryBool, strictObject, Timestamp } from '../../platform/http/schemas.js';
import { component } from '../../platform/openapi/meta.js';

const Url = Type.String({ minLength: 1, maxLength: 2048, description: 'https (http too in testnet), at most 2,048 characters' });
const EventName = Type.Unsafe<string>({ type: 'string', enum: ['*', ...EVENT_TYPES], description: 'an event of the catalogue, or "*" for all' });
const Events = Type.Array(EventName, { minItems: 1, maxItems: EVENT_TYPES.length + 1, uniqueItems: true });
const Secret = Type.String({ minLength: 16, maxLength: 256, description: '16-256 printable ASCII; whsec_ + base64 of 24-64 bytes for that form' });

export const ProjectWebhooksParams = strictObject({ projectId: Id });
export const WebhookParams = strictObject({ projectId: Id, webhookId: Id });
export const DeliveryParams = strictObject({ projectId: Id, deliveryId: Id });

export const CreateWebhookBody = strictObject({ url: Url, events: Events, secret: Type.Optional(Secret) });
/** Only what is given changes; any PUT also re-enables a disabled subscription. */
export const UpdateWebhookBody = strictObject({ url: Type.Optional(Url), events: Type.Optional(Events) });
export const RotateWebhookSecretBody = strictObject({ secret: Type.Optional(Secret) });
export const ListWebhooksQuery = strictObject({ showDeleted: Type.Optional(QueryBool), ...PageQuery });

const subscriptionFields = {
  id: IdOut,
  projectId: IdOut,
  url: Type.String(),
  events: Type.Array(Type.String()),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  deletedAt: NullableTimestamp,
  disabledAt: NullableTimestamp,
  disabledReason: Type.Union([Type.String(), Type.Null()]),
};
export const SubscriptionOut = component('WebhookSubscription', Type.Object(subscriptionFields, { additionalProperties: false }));
export const SubscriptionList = pageOf('webhooks', SubscriptionOut);
export const SubscriptionCreated = Type.Object(
  { ...subscriptionFields, secret: Type.Optional(Type.String({ description: 'shown once, when the service generated it' })) },
  { additionalProperties: false },
);
export const SecretOut = Type.Object({ secret: Type.String({ description: 'shown once' }) }, { additionalProperties: false });
export const TestSent = Type.Object(
  {
    status: Type.Literal('accepted'),
    event: Type.Literal('webhook.test'),
    deliveryId: IdOut,
    webhookId: Type.String({ description: 'the webhook-id header of the delivery' }),
  },
  { additionalProperties: false },
);
export const RetryAccepted = Type.Object({ id: IdOut, status: Type.Literal('pending') }, { additionalProperties: false });
export const EventCatalogueOut = Type.Object(
  { events: Type.Array(Type.Object({ name: Type.String(), description: Type.String(), data: Type.String() }, { additionalProperties: false })) },
  { additionalProperties: false },
);
export const FailedDeliveryOut = component(
  'FailedDelivery',
  Type.Object(
    {
      id: IdOut,
      kind: Type.Union([Type.Literal('wallet'), Type.Literal('subscription')]),
      webhookId: Type.Union([IdOut, Type.Null()], { description: 'the subscription id; null for wallet webhooks' }),
      event: Type.Union([Type.String(), Type.Null()]),
      url: Type.Union([Type.String(), Type.Null()]),
      payload: Type.Unknown({ description: 'the body that was sent' }),
      attempts: Type.Integer({ minimum: 0 }),
      lastStatus: Type.Union([Type.Integer(), Type.Null()]),
      lastError: Type.Union([Type.String(), Type.Null()]),
      lastResponseBody: Type.Union([Type.String(), Type.Null()]),
      lastAttemptAt: NullableTimestamp,
      createdAt: Timestamp,
    },
    { additionalProperties: false },
  ),
);
export const FailedDeliveryList = pageOf('failedDeliveries', FailedDeliveryOut);
