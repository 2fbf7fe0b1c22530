import type { Knex } from 'knex';

/**
 * An Idempotency-Key record is now reserved by a committed statement instead of a row lock held
 * across the request (src/http/idempotency.ts): `owner` names the request that runs it and
 * `lease_until` says when a record that never got its answer (its process died) may be taken
 * over. Rows written before (answered ones, and those a process of the previous release writes
 * during a rolling upgrade, which sets neither column) get a lease of five minutes from their
 * write, so a request the previous release still runs is not run a second time meanwhile.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE idempotency_keys
      ADD COLUMN owner uuid,
      ADD COLUMN lease_until timestamptz NOT NULL DEFAULT now() + interval '5 minutes'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE idempotency_keys DROP COLUMN owner, DROP COLUMN lease_until');
}
