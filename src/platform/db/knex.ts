import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import type { Logger } from '../logging/logger.js';
import { sharePool, shareWaiting, tenantShare } from './share.js';

/** Any place a query can run: the pool or an open transaction. Repositories take one first. */
export type Executor = Knex | Knex.Transaction;
export type { Knex };

// bigint ids stay below 2^53 for the life of any deployment; numbers are what the API returns.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number.parseInt(v, 10));

export interface DbOptions {
  url: string;
  /** Where knex's own warnings go (it writes to the console otherwise). */
  log?: Logger;
  poolMax: number;
  /** How long a query waits for a pooled connection before the request gets a 503. */
  acquireTimeoutMs?: number;
  /** Whether hotQuery names its statements (default true); see hotQuery. */
  preparedStatements?: boolean;
}

/** The pools whose hot statements are sent unnamed (DB_PREPARED_STATEMENTS=false), by their client's configuration (a transaction's client shares it). */
const unprepared = new WeakSet<object>();

export function createDb(options: DbOptions): Knex {
  const db = knexFactory({
    client: 'pg',
    connection: { connectionString: options.url, connectionTimeoutMillis: 5_000 },
    pool: { min: 0, max: options.poolMax },
    acquireConnectionTimeout: options.acquireTimeoutMs ?? 10_000,
    log: {
      warn: (m: unknown) => options.log?.warn({ knex: String(m) }, 'database warning'),
      error: (m: unknown) => options.log?.error({ knex: String(m) }, 'database error'),
      deprecate: (m: unknown) => options.log?.warn({ knex: String(m) }, 'database deprecation'),
      debug: (m: unknown) => options.log?.debug({ knex: String(m) }, 'database debug'),
    },
  });
  if (options.preparedStatements === false) unprepared.add((db.client as { config: object }).config);
  sharePool(db, tenantShare(options.poolMax), options.acquireTimeoutMs ?? 10_000);
  return db;
}

/**
 * A JS array as one bind parameter: node-postgres sends it as a PostgreSQL array literal (nulls
 * included) for `unnest(?::text[])`; knex's types only know arrays without nulls.
 */
export const pgArray = (values: ReadonlyArray<string | number | boolean | null>): Knex.Value => values as unknown as Knex.Value;

interface PooledPg {
  acquireConnection(): Promise<pg.ClientBase>;
  releaseConnection(connection: pg.ClientBase): Promise<void>;
}

/**
 * A condition true of every row of a JSON or array record set keyed by `column` (ids are
 * positive) that the planner takes to keep one row in 200 (a range over a column it has no
 * statistics of). It takes such a set for 100 rows, or for its LIMIT, where a call brings a few:
 * joined to a table of some thousand rows, 25 index lookups looked dearer than reading the table
 * whole, which it then did on every call. Estimated at one row, the set is joined by index lookups.
 */
export const keyedRows = (column: string): string => `${column} BETWEEN 1 AND 9223372036854775807`;

/**
 * One parameterised statement (`$1`, `$2`, … placeholders) on a connection of knex's own pool,
 * through node-postgres directly, as a named prepared statement: for the statements that run on
 * every request or every send (sign-in's project and wallet lookup, a transaction's status
 * changes). Prepared, PostgreSQL plans the statement
 * a few times per connection and then keeps a generic plan; unprepared, planning that join cost
 * the database 0.6-0.9 ms per request, more than running it (bench/README.md). knex's formatter
 * and runner are skipped too (about 6% of the request). In a transaction it runs, prepared too,
 * on the transaction's own connection. Errors are node-postgres's (or knex's pool timeout), mapped
 * like any other database error. `name` must be unique to `sql`. With DB_PREPARED_STATEMENTS=false
 * (PgBouncer before 1.21 in transaction mode cannot keep prepared statements) they go unnamed.
 */
export async function hotQuery<R>(db: Executor, name: string, sql: string, bindings: readonly unknown[]): Promise<R[]> {
  // A finished transaction's connection is back in the pool, maybe in another borrower's transaction: refused, as knex refuses it.
  if (db.isTransaction && (db as Knex.Transaction).isCompleted()) throw new Error(`${name}: the transaction is already complete`);
  // A transaction's client answers its own connection and releases nothing (knex's makeTxClient).
  const pool = db.client as unknown as PooledPg & { config: object };
  const connection = await pool.acquireConnection();
  try {
    const values = bindings as unknown[];
    const { rows } = await connection.query<R & pg.QueryResultRow>(unprepared.has(pool.config) ? { text: sql, values } : { name, text: sql, values });
    return rows;
  } finally {
    // knex's release is synchronous (it returns a resolved promise): nothing to wait for.
    void pool.releaseConnection(connection);
  }
}

/** The parts of knex's pool (tarn) its gauges read. */
interface TarnPool {
  max: number;
  numUsed(): number;
  numFree(): number;
  numPendingAcquires(): number;
}

/** `db`'s connection pool now: lent out, idle, its limit, queries waiting for it and for their tenant's share; undefined once destroyed. */
export function poolState(db: Knex): { used: number; idle: number; max: number; pendingAcquires: number; shareWaits: number } | undefined {
  const pool = (db.client as { pool?: TarnPool }).pool;
  if (!pool) return undefined;
  return { used: pool.numUsed(), idle: pool.numFree(), max: pool.max, pendingAcquires: pool.numPendingAcquires(), shareWaits: shareWaiting(db) };
}

/** `s` as literal text inside a LIKE pattern (its `%`, `_` and backslash escaped): callers add their own wildcards. */
export const likeLiteral = (s: string): string => s.replace(/[\\%_]/g, (c) => `\\${c}`);
