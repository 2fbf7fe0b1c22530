import type { Knex } from 'knex';

/**
 * The audience a project's user tokens carry when their provider cannot put the service's in an
 * ID token (the customer's client id): null means the service's audience (SERVICE_AUDIENCE).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE projects ADD COLUMN audience text');
  await knex.raw(
    `ALTER TABLE projects ADD CONSTRAINT projects_audience_shape CHECK (audience IS NULL OR (length(audience) <= 256 AND audience ~ '^[\\x21-\\x7e]+$'))`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE projects DROP CONSTRAINT projects_audience_shape');
  await knex.raw('ALTER TABLE projects DROP COLUMN audience');
}
