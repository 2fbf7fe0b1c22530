import type { Knex } from 'knex';

/**
 * For the bound on a subscription's backlog (src/webhooks/fanout.ts): `owed_to`, the
 * subscriptions a recorded event row is still to be fanned out to once they are below their
 * bound (NULL: to every subscription, as before); its pending deliveries counted per
 * subscription, up to the bound, on an index of their own; and the rows that owe someone.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE outbox ADD COLUMN owed_to bigint[]');
  await knex.raw(`CREATE INDEX outbox_subscription_backlog ON outbox (subscription_id) WHERE kind = 'delivery' AND status = 'pending'`);
  await knex.raw(`CREATE INDEX outbox_owed_events ON outbox (id) WHERE kind = 'event' AND status = 'pending' AND owed_to IS NOT NULL`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX outbox_owed_events');
  await knex.raw('DROP INDEX outbox_subscription_backlog');
  await knex.raw('ALTER TABLE outbox DROP COLUMN owed_to');
}
