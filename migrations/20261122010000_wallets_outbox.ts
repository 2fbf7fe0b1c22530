import type { Knex } from 'knex';

/** Wallets (one per project and lower-cased e-mail) and the outbox that creates them and delivers webhooks. */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('wallets', (t) => {
    t.bigIncrements('id');
    t.bigInteger('project_id').notNullable().references('projects.id');
    t.text('email').notNullable();
    t.text('email_lower').notNullable();
    // Null while the key is being created; EIP-55 once it exists. Unique across the deployment.
    t.text('address').unique();
    t.text('key_id');
    // The `token` of the request that created the wallet, echoed in the wallet-created webhook.
    t.text('creation_token');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('activated_at', { useTz: true });
    t.unique(['project_id', 'email_lower']);
  });

  await knex.schema.createTable('outbox', (t) => {
    t.bigIncrements('id');
    t.bigInteger('project_id').notNullable().references('projects.id');
    // wallet.create: create a wallet's key; delivery: send one webhook; event: an event for subscriptions.
    t.text('kind').notNullable();
    t.text('delivery_kind');
    t.bigInteger('wallet_id').references('wallets.id');
    t.text('event');
    t.text('url');
    // The exact bytes sent and signed on every attempt.
    t.text('payload');
    // The webhook-id: stable across every attempt of one delivery.
    t.text('message_id').notNullable();
    t.text('status').notNullable().defaultTo('pending');
    t.integer('attempts').notNullable().defaultTo(0);
    t.timestamp('next_attempt_at', { useTz: true }).defaultTo(knex.fn.now());
    // A relay holds a row until then; after a crash the lease runs out and another relay takes it.
    t.timestamp('locked_until', { useTz: true });
    t.integer('last_status');
    t.text('last_error');
    t.text('last_response_body');
    t.timestamp('last_attempt_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['project_id', 'status', 'id']);
    t.index(['wallet_id']);
  });
  await knex.raw(`ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('wallet.create', 'delivery', 'event'))`);
  await knex.raw(`ALTER TABLE outbox ADD CONSTRAINT outbox_status_check CHECK (status IN ('pending', 'done', 'failed'))`);
  await knex.raw(`CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE status IN ('pending', 'failed') AND next_attempt_at IS NOT NULL`);
  // At most one queued creation per wallet, however many createasync calls arrive.
  await knex.raw(`CREATE UNIQUE INDEX outbox_one_creation ON outbox (wallet_id) WHERE kind = 'wallet.create' AND status = 'pending'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('outbox');
  await knex.schema.dropTable('wallets');
}
