import { Type } from '@sinclair/typebox';
import { EVENT_TYPES } from '../events/catalogue.js';
import { Id, PageQuery, QueryBool, strictObject } from '../http/schemas.js';

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
