import type { Knex } from '../../platform/db/knex.js';
import type { SecretBox } from '../../platform/crypto/secrets.js';
import type * as Reseal from '../../platform/crypto/reseal.js';
import { UsageError, type Command, type Invocation } from './commands.js';
import { withDatabase } from './database.js';

/** What the `data-key` commands work with: the database, the keyring, the sealed columns and how to move them. */
interface Keyring {
  readonly db: Knex;
  readonly box: SecretBox;
  readonly columns: readonly Reseal.SealedColumn[];
  readonly reseal: typeof Reseal;
}

/** The keyring and the database the `data-key` commands work on (DATABASE_URL, DATA_ENCRYPTION_KEY, DATA_DECRYPTION_KEYS). */
async function withKeyring<T>(env: Invocation['env'], fn: (k: Keyring) => Promise<T>): Promise<T> {
  const url = env.databaseUrl;
  if (!url) throw new UsageError('set DATABASE_URL to the service database');
  let keys: { current: Buffer; decryptOnly: Buffer[] };
  try {
    keys = env.dataKeys();
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const [secrets, reseal, sealed] = await Promise.all([
    import('../../platform/crypto/secrets.js'),
    import('../../platform/crypto/reseal.js'),
    import('../sealed.js'),
  ]);
  return withDatabase(url, (db) => fn({ db, box: new secrets.SecretBox(keys.current, keys.decryptOnly), columns: sealed.SEALED_COLUMNS, reseal }));
}

/** Rows of `status`: each sealed column, and how many of its values are under which key. */
async function statusRows({ db, box, columns, reseal }: Keyring): Promise<Array<{ column: string; current: number; other: number; under: string }>> {
  const rows = [];
  for (const col of columns) {
    const counts = await reseal.sealedCounts(db, box, col);
    const other = Object.entries(counts).filter(([k]) => k !== 'current');
    rows.push({
      column: `${col.table}.${col.column}`,
      current: counts['current'] ?? 0,
      other: other.reduce((n, [, c]) => n + c, 0),
      under: other.map(([k, c]) => `${k}: ${c}`).join(', '),
    });
  }
  return rows;
}

export const DATA_KEY_COMMANDS: Record<string, Command> = {
  'data-key status': {
    usage: 'data-key status   (uses DATABASE_URL, DATA_ENCRYPTION_KEY)',
    summary: 'how many sealed values are under the current data encryption key and how many under others; exit 1 while any are not current',
    async run({ out, env }) {
      return withKeyring(env, async (k) => {
        const rows = await statusRows(k);
        out.note(`current key: ${k.box.currentKeyId}`);
        out.table(rows, ['column', 'current', 'other', 'under']);
        const left = rows.reduce((n, r) => n + r.other, 0);
        out.note(
          left === 0
            ? 'every sealed value is under the current key: the other keys can go'
            : `${left} value(s) under other keys: run custody data-key reencrypt`,
        );
        return left === 0 ? 0 : 1;
      });
    },
  },
  'data-key reencrypt': {
    usage: 'data-key reencrypt [--batch N]   (uses DATABASE_URL, DATA_ENCRYPTION_KEY, DATA_DECRYPTION_KEYS)',
    summary:
      'move every sealed value to the current data encryption key, beside live traffic; resumable (run it again); exit 1 if any value could not be opened',
    options: { batch: 'rows per statement (default 500)' },
    async run({ flags, out, env }) {
      const batchFlag = flags['batch'];
      if (batchFlag !== undefined && (typeof batchFlag !== 'string' || !/^[1-9][0-9]{0,4}$/.test(batchFlag)))
        throw new UsageError('--batch must be a positive integer');
      const batch = typeof batchFlag === 'string' ? Number(batchFlag) : 500;
      return withKeyring(env, async (k) => {
        out.note(`re-encrypting under key ${k.box.currentKeyId}`);
        const results = [];
        for (const col of k.columns) {
          const done = await k.reseal.resealColumn(k.db, k.box, col, {
            batch,
            onBatch: (p) => out.note(`${p.table}.${p.column}: ${p.moved} moved, ${p.unreadable} unreadable`),
          });
          results.push({ column: `${done.table}.${done.column}`, moved: done.moved, unreadable: done.unreadable });
        }
        out.table(results, ['column', 'moved', 'unreadable']);
        const left = (await statusRows(k)).reduce((n, r) => n + r.other, 0);
        const unreadable = results.reduce((n, r) => n + r.unreadable, 0);
        if (unreadable > 0) out.note(`${unreadable} value(s) could not be opened with the keys given: add their key to DATA_DECRYPTION_KEYS and run again`);
        out.note(left === 0 ? 'every sealed value is under the current key: the other keys can go' : `${left} value(s) still under other keys`);
        return unreadable === 0 && left === 0 ? 0 : 1;
      });
    },
  },
};
