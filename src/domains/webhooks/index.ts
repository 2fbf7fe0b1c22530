import { defineDomain } from '../domain.js';
import { WEBHOOK_EVENTS } from './events.js';
import { failedDeliveryEndpoints } from './failed-deliveries.js';
import { webhookEndpoints } from './routes.js';
import { webhookJobs } from './jobs.js';
import { subscriptionSecretAad } from './secrets.js';

const subscriptionSecret = (column: string) => ({
  table: 'webhook_subscriptions',
  column,
  key: ['id'],
  aad: (row: Readonly<Record<string, unknown>>) => subscriptionSecretAad(Number(row['id'])),
});

export const webhooksDomain = defineDomain({
  name: 'webhooks',
  events: WEBHOOK_EVENTS,
  // The failed-deliveries list before `/webhooks/:webhookId`, which would otherwise take its path.
  endpoints: (deps) => [...failedDeliveryEndpoints(deps), ...webhookEndpoints(deps)],
  jobs: (deps) => webhookJobs(deps),
  sealed: [subscriptionSecret('secret_enc'), subscriptionSecret('secret_prev_enc')],
});
