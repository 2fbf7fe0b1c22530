import { expect } from 'chai';
import type { Knex } from 'knex';
import type { Reply } from './http.js';
import pg from 'pg';
import { createDb } from '../../src/platform/db/knex.js';
import { runNextMigration } from '../../src/platform/db/migrate.js';

/** The machine's PostgreSQL (CI starts it); each test run works in a database of its own. */
export const ADMIN_DATABASE_URL = process.env['TEST_ADMIN_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres';

let current: { url: string; db: Knex } | undefined;

export function setTestDatabase(url: string, db: Knex): void {
  current = { url, db };
}

export function testDatabaseUrl(): string {
  if (!current) throw new Error('the test database is not set up (test/support/hooks.ts)');
  return current.url;
}

export function testDb(): Knex {
  if (!current) throw new Error('the test database is not set up (test/support/hooks.ts)');
  return current.db;
}

/** One statement on the admin database (CREATE/DROP DATABASE). */
export async function adminQuery(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

export function databaseUrlFor(name: string): string {
  const url = new URL(ADMIN_DATABASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * A fingerprint of every row of every application table: equal before and after a request
 * means the request changed nothing.
 */
export async function snapshot(db: Knex, options: { except?: string[] } = {}): Promise<Record<string, string>> {
  const { rows: tables } = await db.raw<{ rows: Array<{ tablename: string }> }>(
    `SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename NOT LIKE 'knex_migrations%' ORDER BY tablename`,
  );
  const result: Record<string, string> = {};
  for (const { tablename } of tables) {
    if (options.except?.includes(tablename)) continue;
    const { rows } = await db.raw<{ rows: Array<{ h: string }> }>(`SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) AS h FROM ?? t`, [
      tablename,
    ]);
    result[tablename] = rows[0]?.h ?? '';
  }
  return result;
}

/**
 * The call answers `status` with problem+json and `code`, and changes no row of any table. Given an
 * app, its background work is stopped meanwhile: the run's database is shared, and a retry or an
 * expiry of another test's rows is not a change the call made.
 */
export async function expectUnchanged<T>(
  where: Knex | { db: Knex; quiet<R>(fn: () => Promise<R>): Promise<R> },
  call: () => Promise<Reply<T>>,
  status: number,
  code: string,
): Promise<Reply<T>> {
  const [db, quiet] = 'quiet' in where ? [where.db, <R>(fn: () => Promise<R>) => where.quiet(fn)] : [where, <R>(fn: () => Promise<R>) => fn()];
  const { res, before, after } = await quiet(async () => {
    const first = await snapshot(db);
    const reply = await call();
    return { res: reply, before: first, after: await snapshot(db) };
  });
  expect(res.status, res.text).to.equal(status);
  expect(res.headers.get('content-type')).to.match(/^application\/problem\+json/);
  expect(res.problem.code).to.equal(code);
  expect(after).to.deep.equal(before);
  return res;
}

/**
 * A scratch database that uses this run's shared signer must be the same deployment as the run's
 * database (the signer's store belongs to one deployment): its id is set to the run's.
 */
export async function shareRunDeployment(db: Knex): Promise<void> {
  const run = await testDb()<{ id: string }>('deployment').first('id');
  if (!run) throw new Error('the run database has no deployment row');
  await db('deployment').update({ id: run.id });
}

/** A database of its own on the machine's PostgreSQL (not migrated); `drop` closes and removes it. */
export async function ownDatabase(name: string): Promise<{ url: string; db: Knex; drop(): Promise<void> }> {
  await adminQuery(`CREATE DATABASE ${name}`);
  const url = databaseUrlFor(name);
  const handle = {
    url,
    db: createDb({ url, poolMax: 5 }),
    drop: async () => {
      await handle.db.destroy();
      await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
  return handle;
}

/** Applies migrations one by one up to and including `last` (a database as an earlier release left it). */
export async function migrateTo(db: Knex, last: string): Promise<void> {
  for (;;) {
    const applied = await runNextMigration(db);
    if (applied.length === 0) throw new Error(`${last} is not a migration`);
    if (applied.includes(last)) return;
  }
}
