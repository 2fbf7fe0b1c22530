import type { Knex } from 'knex';
import type { SignerClient } from '../../platform/signer/client.js';
import { GENESIS, rowHash } from './chain.js';
import { chainHead, insertChain, insertCheckpoint, lastCheckpointSize, raiseFloor, sealerBounds, unsealedRows } from './repository.js';

/** The advisory lock the sealer holds for a batch: one sealer at a time across every process. */
const SEALER_LOCK = 0x63_75_73_74_61_75_64; // "custaud"
const CHECKPOINT_LOCK = SEALER_LOCK + 1;

/** Rows per sealing transaction: large enough to keep up, small enough to keep each transaction short. */
export const SEAL_BATCH = 2_000;

/**
 * One pass of the sealer (docs/audit.md): takes the committed rows that have no place yet, in id
 * order, and numbers and hashes them after the chain's head into audit_chain (insert only), batch
 * by batch until none is left. It looks only at rows of transactions from the floor on; a pass
 * that saw every such row raises the floor to its snapshot's xmin (or the bound it read, if lower).
 * A row that commits late with a lower id is simply sealed in a later pass: its place is when the
 * sealer first saw it committed. Writers never wait for this. Returns the rows sealed.
 */
export async function sealAuditLog(db: Knex, batch = SEAL_BATCH, onSealed?: (ids: readonly number[]) => void): Promise<number> {
  let total = 0;
  // After a full batch, the next one goes on from its last id (a backlog is read once, not from
  // its start each time); a pass from the start (0) then finds rows that committed late below it.
  let afterId = 0;
  for (;;) {
    const sealed = await db.transaction(async (tx) => {
      const { rows } = await tx.raw<{ rows: Array<{ locked: boolean }> }>('SELECT pg_try_advisory_xact_lock(?) AS locked', [SEALER_LOCK]);
      // Another process is sealing: its pass takes these rows.
      if (!rows[0]?.locked) return undefined;
      // Going on after an id: rows there below the floor are sealed and skipped by the anti-join, so the primary key alone is read.
      const bounds = afterId === 0 ? await sealerBounds(tx) : undefined;
      const { horizon, rows: pending } = await unsealedRows(tx, bounds ?? { afterId }, batch);
      if (pending.length > 0) {
        const head = await chainHead(tx);
        let prev = head?.hash ?? GENESIS;
        let seq = head?.seq ?? 0;
        const out = pending.map((row) => {
          seq += 1;
          const hash = rowHash(prev, { ...row, seq });
          const item = { id: row.id, organisationId: row.organisationId, seq, prevHash: prev, hash };
          prev = hash;
          return item;
        });
        await insertChain(tx, out);
      }
      // This pass saw every committed row from the floor up to the bound, and so every row of a
      // transaction below its snapshot's xmin and the bound: those had ended (committed and seen, or aborted).
      if (bounds && pending.length < batch) await raiseFloor(tx, horizon, bounds.upper);
      return pending.map((p) => p.id);
    });
    if (sealed === undefined) return total;
    // Committed: what the benchmark measures the sealer's lag by.
    if (sealed.length > 0) onSealed?.(sealed);
    total += sealed.length;
    if (sealed.length === batch) afterId = sealed[sealed.length - 1] ?? 0;
    else if (afterId !== 0) afterId = 0;
    else return total;
  }
}

/**
 * Signs a checkpoint `{ size, head, time }` of the chain with the service key when it grew since
 * the last one, and stores it. Returns its size, or 0 when there was nothing new to sign.
 */
export async function checkpointAuditLog(db: Knex, signer: Pick<SignerClient, 'serviceSign'>, now: () => number): Promise<number> {
  return db.transaction(async (tx) => {
    const { rows } = await tx.raw<{ rows: Array<{ locked: boolean }> }>('SELECT pg_try_advisory_xact_lock(?) AS locked', [CHECKPOINT_LOCK]);
    if (!rows[0]?.locked) return 0;
    const head = await chainHead(tx);
    if (!head || head.seq <= (await lastCheckpointSize(tx))) return 0;
    const at = new Date(now());
    const jws = await signer.serviceSign('audit-checkpoint', { size: head.seq, head: head.hash.toString('hex'), time: at.toISOString() });
    const kid = (JSON.parse(Buffer.from(jws.split('.')[0] ?? '', 'base64url').toString('utf8')) as { kid?: unknown }).kid;
    await insertCheckpoint(tx, { size: head.seq, head: head.hash, at, kid: typeof kid === 'string' ? kid : '', jws });
    return head.seq;
  });
}
