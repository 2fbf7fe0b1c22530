import type { Knex } from 'knex';

/**
 * Stored idempotent answers are sealed under DATA_ENCRYPTION_KEY from now on (src/http/idempotency.ts).
 * Records kept in clear by earlier releases may hold shown-once secrets, and a migration cannot
 * seal them (it has no key): they are deleted. A client that retries across the upgrade runs its
 * request again, as after the 24 h any record lives.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('DELETE FROM idempotency_keys');
}

export async function down(): Promise<void> {}
