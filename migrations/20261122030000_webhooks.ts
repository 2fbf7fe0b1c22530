import type { Knex } from 'knex';

/** Project webhook subscriptions (docs/interface.md section 8) and their deliveries in the outbox. */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('webhook_subscriptions', (t) => {
    t.bigIncrements('id');
    t.bigInteger('project_id').notNullable().references('projects.id');
    t.text('url').notNullable();
    // Event names, or ['*'] for every event.
    t.specificType('events', 'text[]').notNullable();
    // AES-256-GCM under DATA_ENCRYPTION_KEY, bound to the row id; the previous one lives 24 h after a rotation.
    t.text('secret_enc').notNullable();
    t.text('secret_prev_enc');
    t.timestamp('secret_prev_expires_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('deleted_at', { useTz: true });
    t.timestamp('disabled_at', { useTz: true });
    t.text('disabled_reason');
    // Start of the current run of failed attempts (null after any success): five days of it disable the subscription.
    t.timestamp('failing_since', { useTz: true });
    t.index(['project_id', 'id']);
  });

  await knex.schema.alterTable('outbox', (t) => {
    t.bigInteger('subscription_id').references('webhook_subscriptions.id');
    // The event a subscription delivery carries (its envelope id), for tracing.
    t.text('event_id');
    // Set by POST …/failedDeliveries/{id}/retry: one attempt now, back to failed if it fails.
    t.boolean('manual_retry').notNullable().defaultTo(false);
  });
  // What the fan-out looks for.
  await knex.raw(`CREATE INDEX outbox_pending_events ON outbox (id) WHERE kind = 'event' AND status = 'pending'`);
  // Event rows are the bulk of the outbox (three per issued membership): indexes that never
  // serve them leave them out, so recording an event maintains two indexes, not six.
  await knex.raw(`CREATE INDEX outbox_subscription ON outbox (subscription_id) WHERE subscription_id IS NOT NULL`);
  await knex.raw('DROP INDEX outbox_project_id_status_id_index');
  await knex.raw(`CREATE INDEX outbox_failed ON outbox (project_id, id) WHERE kind = 'delivery' AND status = 'failed'`);
  await knex.raw('DROP INDEX outbox_wallet_id_index');
  await knex.raw(`CREATE INDEX outbox_wallet ON outbox (wallet_id) WHERE wallet_id IS NOT NULL AND kind <> 'event'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX outbox_pending_events');
  await knex.raw('DROP INDEX outbox_subscription');
  await knex.raw('DROP INDEX outbox_failed');
  await knex.raw('DROP INDEX outbox_wallet');
  await knex.raw('CREATE INDEX outbox_project_id_status_id_index ON outbox (project_id, status, id)');
  await knex.raw('CREATE INDEX outbox_wallet_id_index ON outbox (wallet_id)');
  await knex.schema.alterTable('outbox', (t) => {
    t.dropColumn('subscription_id');
    t.dropColumn('event_id');
    t.dropColumn('manual_retry');
  });
  await knex.schema.dropTable('webhook_subscriptions');
}
