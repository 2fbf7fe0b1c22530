import type { Knex } from 'knex';

/**
 * Due rows grouped by destination host and project, for the relay's claim (src/outbox/repository.ts):
 * the claim walks the groups that have work (one index probe each) and skips a busy host's or
 * project's group whole, instead of reading and filtering out every one of its due rows. A dead
 * endpoint's backlog (15,000 due rows in bench:fairness) was read again by every claim.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    `CREATE INDEX outbox_due_by_group ON outbox (kind, (coalesce(delivery_kind, '')), (coalesce(destination, '')), project_id, next_attempt_at, id)
      WHERE status IN ('pending', 'failed') AND next_attempt_at IS NOT NULL AND kind <> 'event'`,
  );
  await knex.raw('DROP INDEX outbox_due_by_kind');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(
    `CREATE INDEX outbox_due_by_kind ON outbox (kind, (coalesce(delivery_kind, '')), next_attempt_at, id)
      WHERE status IN ('pending', 'failed') AND next_attempt_at IS NOT NULL AND kind <> 'event'`,
  );
  await knex.raw('DROP INDEX outbox_due_by_group');
}
