import { MEMBERSHIP_EVENTS } from '../memberships/events.js';
import { SIGNING_EVENTS } from '../signing/events.js';
import { TRANSACTION_EVENTS } from '../transactions/events.js';
import { WALLET_EVENTS } from '../wallets/events.js';
import { WEBHOOK_EVENTS } from './events.js';

/** One event type: its name, what it means, and what its `data` holds. */
export interface EventDefinition {
  readonly name: string;
  readonly description: string;
  readonly data: string;
}

/**
 * What subscriptions may name and `GET /webhooks/events` lists: each domain's own event types
 * (its `events.ts`, also in its manifest), in the order of the list of domains. Gathered here from
 * the data files rather than from the manifests, because the webhook schemas need the names while
 * modules load; test/domains/domains.test.ts checks that the two agree.
 */
export const EVENT_CATALOGUE = [...WALLET_EVENTS, ...MEMBERSHIP_EVENTS, ...WEBHOOK_EVENTS, ...SIGNING_EVENTS, ...TRANSACTION_EVENTS] as const;

export type EventType = (typeof EVENT_CATALOGUE)[number]['name'];
export const EVENT_TYPES: readonly EventType[] = EVENT_CATALOGUE.map((e) => e.name);
