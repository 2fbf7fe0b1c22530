import type { Executor } from '../db/knex.js';
import { deleteInBatches } from '../db/batches.js';

/**
 * Deletes outbox rows that are done and older than `retentionDays` (delivered webhooks, sent
 * events, finished wallet creations), `batch` at a time until none is left (deleteInBatches).
 * Pending and failed rows are never touched: they are work still to do, or the failed-deliveries
 * list.
 */
export async function pruneOutbox(db: Executor, retentionDays: number, batch = 5_000): Promise<number> {
  return deleteInBatches(async (n) => {
    const { rowCount } = await db.raw<{ rowCount: number }>(
      `DELETE FROM outbox WHERE id IN (
         SELECT id FROM outbox WHERE status = 'done' AND created_at < now() - make_interval(days => ?) ORDER BY id LIMIT ?)`,
      [retentionDays, n],
    );
    return rowCount;
  }, batch);
}
