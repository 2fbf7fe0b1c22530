import type { Knex } from 'knex';

/**
 * Request counters for rate limiting when no REDIS_URL is set: one row per key and window.
 * UNLOGGED: counters need not survive a crash, and skipping the WAL keeps each hit cheap.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE UNLOGGED TABLE rate_limits (key text NOT NULL, window_start bigint NOT NULL, hits integer NOT NULL, PRIMARY KEY (key, window_start))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('rate_limits');
}
