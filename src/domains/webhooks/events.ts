import type { EventDefinition } from './catalogue.js';

/** The event a subscription test sends. */
export const WEBHOOK_EVENTS = [
  { name: 'webhook.test', description: 'The test endpoint of a subscription was called.', data: '{}' },
] as const satisfies readonly EventDefinition[];
