import type { Knex } from 'knex';

/**
 * What the fan-out needs to stay cheap however long a subscription is owed (src/webhooks/fanout.ts):
 * `webhook_subscriptions.owed`, how many pending event rows owe it (kept with `owed_to`, in the
 * same transaction), so "which subscriptions are owed" reads a few rows instead of every owed
 * row; new rows claimed on an index that leaves owed rows out; owed rows found by the
 * subscriptions that may be served now (GIN on `owed_to`).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE webhook_subscriptions ADD COLUMN owed integer NOT NULL DEFAULT 0');
  await knex.raw(
    `UPDATE webhook_subscriptions s SET owed = c.n
       FROM (SELECT unnest(owed_to) AS id, count(*)::int AS n FROM outbox WHERE kind = 'event' AND status = 'pending' AND owed_to IS NOT NULL GROUP BY 1) c
      WHERE s.id = c.id`,
  );
  await knex.raw('CREATE INDEX webhook_subscriptions_owed ON webhook_subscriptions (id) WHERE owed > 0');
  await knex.raw(`CREATE INDEX outbox_fresh_events ON outbox (id) WHERE kind = 'event' AND status = 'pending' AND owed_to IS NULL`);
  await knex.raw(`CREATE INDEX outbox_owed_to ON outbox USING gin (owed_to) WHERE kind = 'event' AND status = 'pending' AND owed_to IS NOT NULL`);
  await knex.raw('DROP INDEX outbox_owed_events');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`CREATE INDEX outbox_owed_events ON outbox (id) WHERE kind = 'event' AND status = 'pending' AND owed_to IS NOT NULL`);
  await knex.raw('DROP INDEX outbox_owed_to');
  await knex.raw('DROP INDEX outbox_fresh_events');
  await knex.raw('DROP INDEX webhook_subscriptions_owed');
  await knex.raw('ALTER TABLE webhook_subscriptions DROP COLUMN owed');
}
