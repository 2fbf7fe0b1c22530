import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import type { Logger } from '../logger.js';

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
}

export function createDb(options: DbOptions): Knex {
  return knexFactory({
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
}

/**
 * A JS array as one bind parameter: node-postgres sends it as a PostgreSQL array literal (nulls
 * included) for `unnest(?::text[])`; knex's types only know arrays without nulls.
 */
export const pgArray = (values: ReadonlyArray<string | number | boolean | null>): Knex.Value => values as unknown as Knex.Value;
