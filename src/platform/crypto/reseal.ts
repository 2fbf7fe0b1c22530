import type { Knex } from 'knex';
import type { SecretBox } from './secrets.js';

/**
 * A column holding values sealed by SecretBox, declared by the folder that owns its table (one
 * owner per table): what the data-key re-encryption walks. `src/programs/sealed.ts` lists them all.
 */
export interface SealedColumn {
  readonly table: string;
  readonly column: string;
  /** The columns that identify a row, in the order rows are walked. */
  readonly key: readonly string[];
  /** Further columns the AAD is made of. */
  readonly aadColumns?: readonly string[];
  /** The AAD the value was sealed to, from its row. */
  aad(row: Readonly<Record<string, unknown>>): string;
}

export interface ResealProgress {
  table: string;
  column: string;
  /** Values moved to the current key by this run. */
  moved: number;
  /** Values this run could not open: under a key it was not given (or damaged). They stay as they are. */
  unreadable: number;
}

/** How many values of a column are under which key: `current`, another key's id, or `v1` (sealed before key ids). */
export async function sealedCounts(db: Knex, box: SecretBox, col: SealedColumn): Promise<Record<string, number>> {
  const { rows } = await db.raw<{ rows: Array<{ under: string; n: string }> }>(
    `SELECT CASE WHEN ?? LIKE ? THEN 'current' WHEN ?? LIKE 'v2.%' THEN split_part(??, '.', 2) ELSE 'v1' END AS under, count(*) AS n
       FROM ?? WHERE ?? IS NOT NULL AND ?? <> '' GROUP BY 1`,
    [col.column, `v2.${box.currentKeyId}.%`, col.column, col.column, col.table, col.column, col.column],
  );
  return Object.fromEntries(rows.map((r) => [r.under, Number(r.n)]));
}

/**
 * Moves every value of `col` not under the current key to it, `batch` rows at a time. Each row is
 * written only if its value is still the one read (a concurrent change wins, and is under the
 * current key already), so it runs beside live traffic, and a run stopped anywhere resumes by
 * running again: what is moved is skipped, since it is current.
 */
export async function resealColumn(
  db: Knex,
  box: SecretBox,
  col: SealedColumn,
  options: { batch?: number; onBatch?: (p: ResealProgress) => void } = {},
): Promise<ResealProgress> {
  const batch = options.batch ?? 500;
  const progress: ResealProgress = { table: col.table, column: col.column, moved: 0, unreadable: 0 };
  const keyList = col.key.map(() => '??').join(', ');
  let after: Knex.Value[] | undefined;
  for (;;) {
    const rows = (
      await db.raw<{ rows: Array<Record<string, unknown>> }>(
        `SELECT ${[...col.key, ...(col.aadColumns ?? []), col.column].map(() => '??').join(', ')}
         FROM ?? WHERE ?? IS NOT NULL AND ?? <> '' AND ?? NOT LIKE ?
          ${after ? `AND (${keyList}) > (${col.key.map(() => '?').join(', ')})` : ''}
        ORDER BY ${keyList} LIMIT ?`,
        [
          ...col.key,
          ...(col.aadColumns ?? []),
          col.column,
          col.table,
          col.column,
          col.column,
          col.column,
          `v2.${box.currentKeyId}.%`,
          ...(after ? [...col.key, ...after] : []),
          ...col.key,
          batch,
        ],
      )
    ).rows;
    if (rows.length === 0) return progress;
    for (const row of rows) {
      const old = String(row[col.column]);
      let fresh: string;
      try {
        fresh = box.seal(box.open(old, col.aad(row)), col.aad(row));
      } catch {
        // Under a key this run was not given, or damaged: counted, left as it is.
        progress.unreadable++;
        continue;
      }
      const where = Object.fromEntries(col.key.map((k) => [k, row[k] as Knex.Value]));
      const changed = await db(col.table)
        .where(where)
        .andWhere(col.column, old)
        .update({ [col.column]: fresh });
      progress.moved += changed;
    }
    const last = rows[rows.length - 1] ?? {};
    after = col.key.map((k) => last[k] as Knex.Value);
    options.onBatch?.({ ...progress });
  }
}
