import type { Knex } from 'knex';

/**
 * Events of a stream (a transaction's status changes) are delivered to each subscription in their
 * order (docs/webhooks.md): `webhook_stream_cursors` holds, per subscription and stream, the
 * newest sequence number settled (delivered, or failed for good). `transactions.events` lists a
 * transaction's event types so far: which earlier ones a subscription receives follows from it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE webhook_stream_cursors (
      subscription_id bigint NOT NULL REFERENCES webhook_subscriptions(id) ON DELETE CASCADE,
      stream text NOT NULL,
      settled integer NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (subscription_id, stream)
    )`);
  await knex.raw(`ALTER TABLE transactions ADD COLUMN events text[] NOT NULL DEFAULT '{}'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE transactions DROP COLUMN events');
  await knex.raw('DROP TABLE webhook_stream_cursors');
}
