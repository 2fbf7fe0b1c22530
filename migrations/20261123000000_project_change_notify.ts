import type { Knex } from 'knex';

/**
 * Any committed change to organisations, projects or project keys sends a NOTIFY on
 * `custody_projects` (statement-level triggers: one per statement, delivered at commit), so every
 * API process can drop the project-key cache it keeps for sign-in (src/projects/key-cache.ts),
 * whatever made the change: the API, the operator CLI, or SQL by hand.
 */
const TABLES = ['organisations', 'projects', 'project_keys'] as const;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION custody_notify_projects() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('custody_projects', TG_TABLE_NAME);
      RETURN NULL;
    END $$`);
  for (const table of TABLES) {
    await knex.raw(`CREATE TRIGGER ${table}_notify_projects AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ${table}
      FOR EACH STATEMENT EXECUTE FUNCTION custody_notify_projects()`);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const table of TABLES) await knex.raw(`DROP TRIGGER IF EXISTS ${table}_notify_projects ON ${table}`);
  await knex.raw('DROP FUNCTION IF EXISTS custody_notify_projects()');
}
