import type { Knex } from 'knex';

/**
 * The kinds of outbox work are declared by the domains' manifests, not by the schema: a new kind is
 * one manifest entry. The column keeps a shape check (a dotted lower-case name) instead of a list.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check');
  await knex.raw(`ALTER TABLE outbox ADD CONSTRAINT outbox_kind_shape CHECK (kind ~ '^[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)*$' AND length(kind) <= 64)`);
  await knex.raw(`ALTER TABLE outbox ADD CONSTRAINT outbox_delivery_kind_shape CHECK (delivery_kind IS NULL OR delivery_kind ~ '^[a-z][a-z0-9_]{0,31}$')`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE outbox DROP CONSTRAINT outbox_delivery_kind_shape');
  await knex.raw('ALTER TABLE outbox DROP CONSTRAINT outbox_kind_shape');
  await knex.raw(`ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('wallet.create', 'delivery', 'event'))`);
}
