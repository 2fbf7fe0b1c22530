import type { Knex } from 'knex';

/**
 * For the relay's lanes (src/outbox/lane.ts): `destination`, the host (and port) a delivery goes
 * to, written when it is queued, so that a busy host's rows stay unclaimed (rows queued before
 * have none and are bounded by the host their job kind reads at claim time); and an index by
 * kind, so that each lane's claim reads only its own kinds' due rows, however many another
 * lane's tenants have waiting.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE outbox ADD COLUMN destination text');
  await knex.raw(
    `CREATE INDEX outbox_due_by_kind ON outbox (kind, (coalesce(delivery_kind, '')), next_attempt_at, id)
      WHERE status IN ('pending', 'failed') AND next_attempt_at IS NOT NULL AND kind <> 'event'`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX outbox_due_by_kind');
  await knex.raw('ALTER TABLE outbox DROP COLUMN destination');
}
