import type { Knex } from '../../platform/db/knex.js';

/**
 * Runs `fn` on a two-connection pool of `url`, closed after. knex and pg, like every module of
 * the commands that talk to the database, are loaded when such a command runs: the CLI otherwise
 * starts without them (loading the service's modules cost each invocation about a second).
 */
export async function withDatabase<T>(url: string, fn: (db: Knex) => Promise<T>): Promise<T> {
  const { createDb } = await import('../../platform/db/knex.js');
  const db = createDb({ url, poolMax: 2 });
  try {
    return await fn(db);
  } finally {
    await db.destroy();
  }
}
