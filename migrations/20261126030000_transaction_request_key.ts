import type { Knex } from 'knex';

/**
 * A send's Idempotency-Key (with its caller), unique per project: a request run again after the
 * process that ran it first died (its key's lease ran out) finds the transaction it made instead
 * of making a second one.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE transactions ADD COLUMN request_key text');
  await knex.raw('CREATE UNIQUE INDEX transactions_request_key ON transactions (project_id, request_key) WHERE request_key IS NOT NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE transactions DROP COLUMN request_key');
}
