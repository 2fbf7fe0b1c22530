import type { Knex } from 'knex';

/**
 * One `custody_projects` notice per transaction, whatever it wrote: a transaction that writes a
 * project and its key (two statements, two tables) wakes each listener once. A transaction-local
 * setting marks the transaction that has notified; a savepoint rolled back takes the mark back
 * with its notice, so the next write of the enclosing transaction notifies again. Listeners drop
 * the whole cache whatever the payload (the first table written).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION custody_notify_projects() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF current_setting('custody.projects_notified', true) IS DISTINCT FROM 'yes' THEN
        PERFORM set_config('custody.projects_notified', 'yes', true);
        PERFORM pg_notify('custody_projects', TG_TABLE_NAME);
      END IF;
      RETURN NULL;
    END $$`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION custody_notify_projects() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('custody_projects', TG_TABLE_NAME);
      RETURN NULL;
    END $$`);
}
