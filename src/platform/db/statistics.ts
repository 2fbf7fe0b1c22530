import type { Knex } from 'knex';

/** The advisory lock of the pass: one process analyzes at a time (ANALYZE of a table waits for another's). */
const STATISTICS_LOCK = 0x63_75_73_73_74_61; // "cussta"
/** Rows a table must have grown by, besides doubling, before the pass analyzes it. */
export const GROWTH_FLOOR = 1_000;

/**
 * Analyzes the schema's tables that have more than doubled (and grown by GROWTH_FLOOR rows)
 * since PostgreSQL last analyzed them; answers their names. A prepared statement keeps its
 * generic plan until its tables are analyzed again: one planned while a table held a few hundred
 * rows reads it whole for every key it looks up once it holds thousands. Autovacuum analyzes a
 * table after 10% of it changed, but looks at most once a minute, and not at all where it is off:
 * a new deployment's tables grow tenfold in that time under load (docs/decisions.md, "Statistics
 * of young tables"). Old, large tables rarely double; this pass leaves them to autovacuum. Tables
 * the role does not own are left alone (their ANALYZE would only warn).
 */
export async function freshenStatistics(db: Knex): Promise<string[]> {
  return db.transaction(async (held) => {
    const { rows: lock } = await held.raw<{ rows: Array<{ got: boolean }> }>('SELECT pg_try_advisory_xact_lock(?) AS got', [STATISTICS_LOCK]);
    if (!lock[0]?.got) return [];
    const { rows } = await held.raw<{ rows: Array<{ relname: string }> }>(
      `SELECT c.relname FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
        WHERE s.schemaname = current_schema() AND s.n_live_tup > 2 * greatest(c.reltuples, 0) + ?
          AND (pg_has_role(c.relowner, 'USAGE') OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user))
        ORDER BY c.relname`,
      [GROWTH_FLOOR],
    );
    const analyzed: string[] = [];
    for (const { relname } of rows) {
      try {
        // Each table in a short transaction of its own, paced as autovacuum paces itself, never waiting long for a lock (a migration's).
        await db.transaction(async (tx) => {
          await tx.raw("SET LOCAL vacuum_cost_delay = 2; SET LOCAL vacuum_cost_limit = 200; SET LOCAL lock_timeout = '1s'");
          await tx.raw('ANALYZE ??', [relname]);
        });
        analyzed.push(relname);
      } catch {
        // Dropped meanwhile, or locked: the next pass looks again.
      }
    }
    return analyzed;
  });
}
