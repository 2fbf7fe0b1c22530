/** Most batches one run of a prune deletes: 100 of 5,000 rows is half a million rows a run, each batch its own statement. */
export const PRUNE_BATCHES = 100;

/**
 * A delete in batches, repeated until a batch comes back short (nothing more is due) or `most`
 * batches have run; answers the rows deleted. A prune that deleted one batch a run kept up with
 * at most one batch every run (the outbox's 5,000 every 10 minutes: 720,000 rows a day) and fell
 * behind for good past that.
 */
export async function deleteInBatches(deleteBatch: (batch: number) => Promise<number>, batch: number, most = PRUNE_BATCHES): Promise<number> {
  let total = 0;
  for (let n = 0; n < most; n++) {
    const deleted = await deleteBatch(batch);
    total += deleted;
    if (deleted < batch) break;
  }
  return total;
}
