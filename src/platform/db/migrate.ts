import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Knex } from 'knex';

interface MigrationModule {
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

const MIGRATIONS_DIR = new URL('../../../migrations/', import.meta.url);

/**
 * Knex's own directory loader guesses module formats; this source imports our compiled ESM
 * migrations explicitly, in file-name (timestamp) order.
 */
const migrationSource: Knex.MigrationSource<string> = {
  getMigrations: () =>
    Promise.resolve(
      readdirSync(fileURLToPath(MIGRATIONS_DIR))
        .filter((f) => /^\d{14}_[a-z0-9_]+\.js$/.test(f))
        .sort(),
    ),
  getMigrationName: (name) => name,
  getMigration: async (name) => (await import(new URL(name, MIGRATIONS_DIR).href)) as MigrationModule,
};

const migrationConfig: Knex.MigratorConfig = { migrationSource, tableName: 'knex_migrations' };

export async function migrateLatest(db: Knex): Promise<string[]> {
  const [, applied] = (await db.migrate.latest(migrationConfig)) as [number, string[]];
  return applied;
}

export async function pendingMigrations(db: Knex): Promise<string[]> {
  const [, pending] = (await db.migrate.list(migrationConfig)) as [unknown, Array<{ file: string } | string>];
  return pending.map((p) => (typeof p === 'string' ? p : p.file));
}

/** Applies the next pending migration only (the CLI shows progress between them). */
export async function runNextMigration(db: Knex): Promise<string[]> {
  const [, applied] = (await db.migrate.up(migrationConfig)) as [number, string[]];
  return applied;
}
