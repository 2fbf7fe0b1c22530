import type { Knex } from 'knex';
import type { Clock } from '../../platform/runtime/clock.js';
import type { Config } from '../../platform/config/config.js';
import type { SecretBox } from '../../platform/crypto/secrets.js';
import type { Logger } from '../../platform/logging/logger.js';
import { WarnOncePer } from '../../platform/logging/once.js';
import { LANES, type Feeder, type JobKind } from '../../platform/outbox/registry.js';
import { deliverSubscriptionWebhook, deliverWalletWebhook, hostOf, type DeliveryDeps } from './deliver.js';
import { eventFanOut } from './fanout.js';
import { subscriptionsByIds, type SubscriptionRow } from './repository.js';

/**
 * What webhooks/ gives the outbox: the fan-out of recorded events and subscription deliveries in
 * the webhooks lane; wallet-created deliveries in the wallets lane (beside wallet creation,
 * so subscription traffic never delays them).
 */
export function webhookJobs(deps: { db: Knex; config: Config; secretBox: SecretBox; log: Logger; now: Clock }): { kinds: JobKind[]; feeders: Feeder[] } {
  const delivery: DeliveryDeps = { db: deps.db, config: deps.config, secretBox: deps.secretBox, now: deps.now, failures: new WarnOncePer(deps.log) };
  const subscription: JobKind = {
    kind: 'delivery',
    deliveryKind: 'subscription',
    lane: LANES.webhooks,
    // The subscriptions of a claim, in one query: attempts then read none.
    async prepare(rows) {
      const subs = new Map(
        (await subscriptionsByIds(deps.db, [...new Set(rows.flatMap((r) => (r.subscription_id === null ? [] : [r.subscription_id])))])).map((s) => [s.id, s]),
      );
      for (const row of rows) row.context = (row.subscription_id === null ? undefined : subs.get(row.subscription_id)) ?? null;
    },
    destination: (row) => hostOf((row.context as SubscriptionRow | null | undefined)?.url ?? row.url),
    handle: (row) => deliverSubscriptionWebhook(row, delivery),
  };
  const wallet: JobKind = {
    kind: 'delivery',
    deliveryKind: 'wallet',
    lane: LANES.wallets,
    destination: (row) => hostOf(row.url),
    handle: (row) => deliverWalletWebhook(row, delivery),
  };
  return { kinds: [subscription, wallet], feeders: [eventFanOut(deps.db, LANES.webhooks, deps.now, deps.config.webhookBacklogPerSubscription)] };
}
