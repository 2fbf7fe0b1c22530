import { CARRY_KEYS_MAX } from '../../contract/index.js';
import type { Knex } from '../platform/db/knex.js';
import { DependencyUnavailableError } from '../platform/http/errors.js';
import { WarnOncePer } from '../platform/logging/once.js';
import type { Logger } from '../platform/logging/logger.js';
import { CarryOverConflictError, type ProjectUid, type SignerClient } from '../platform/signer/client.js';
import { CarryOverRefusedError, SignerUpgradingError, type CarryOver } from '../platform/signer/carry-over.js';
import { projectUidOf } from '../domains/projects/repository.js';
import { walletKeyIdOf } from '../domains/wallets/repository.js';

/**
 * The carry-over of what the signer kept under projects' numeric ids in earlier releases
 * (migrations/20261124100000_project_uid.ts lists it in `signer_carry_over`), run by every API
 * process at its start and done by one at a time:
 *
 * 1. each listed project's policy versions and policy owners are copied under its uid;
 * 2. each listed wallet's key is bound to its project's uid, from this database's records.
 *
 * A row goes when the signer has done it; the signer's side is idempotent, so a process that dies
 * half-way leaves rows that the next one does again. Until step 1 is over, calls about projects
 * wait (then answer 503 `signer_upgrading`); a key not bound yet answers 503 `key_unbound`.
 * Refusals are kept on their rows and logged at error: a key whose earlier binding disagrees
 * with this database stays unbound; a project whose copy found another document in its place
 * answers 503 `carry_over_refused` for every call about it.
 */
/** How long a call about a project waits for step 1 before it answers 503. */
const WAIT_MS = 2_000;
/** Keys per signer request: the most the signer takes. */
const KEYS_PER_CALL = CARRY_KEYS_MAX;
const LOCK = 'custody:signer-carry-over';

interface Timing {
  /** First and longest pause after a failed pass (the signer or the database unreachable). */
  retryMs: [number, number];
  /** How often a process that does not hold the lock looks whether the other one is done. */
  pollMs: number;
}

export function startCarryOver(deps: { db: Knex; signer: SignerClient; log: Logger; timing?: Partial<Timing> }): CarryOver {
  const { db, signer, log } = deps;
  const timing: Timing = { retryMs: [1_000, 30_000], pollMs: 1_000, ...deps.timing };
  const warn = new WarnOncePer(log);
  let stopped = false;
  let wake: () => void = () => undefined;
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  let documentsCarried = false;
  let openDocuments: () => void = () => undefined;
  const documents = new Promise<void>((resolve) => {
    openDocuments = () => {
      documentsCarried = true;
      resolve();
    };
  });
  /** Projects whose documents were refused: their calls are refused too. */
  let refusedProjects = new Set<string>();

  const documentsDone = async (): Promise<void> => {
    refusedProjects = new Set(await refusedDocumentProjects(db));
    openDocuments();
  };

  const pass = async (): Promise<'done' | 'again'> => {
    const left = await pending(db);
    if (left.documents === 0 && !documentsCarried) await documentsDone();
    if (left.documents === 0 && left.keys === 0) return 'done';
    // One process carries at a time; the others look again until it is done (or gone: its
    // transaction's lock goes with its connection, and the rows it did not finish are still there).
    const carried = await db.transaction(async (tx) => {
      const { rows } = await tx.raw<{ rows: Array<{ locked: boolean }> }>('SELECT pg_try_advisory_xact_lock(hashtext(?)) AS locked', [LOCK]);
      if (!rows[0]?.locked) return false;
      log.info(left, `carrying over what the signer kept under numeric project ids: ${left.documents} projects' documents, ${left.keys} keys`);
      await carryDocuments(db, signer, log, () => stopped);
      if (!stopped) await documentsDone();
      await carryKeys(db, signer, log, () => stopped);
      if (!stopped) log.info('carry-over done');
      return true;
    });
    if (!carried) await pause(timing.pollMs);
    return 'again';
  };

  const done = (async () => {
    let retry = timing.retryMs[0];
    while (!stopped) {
      try {
        if ((await pass()) === 'done') return;
        retry = timing.retryMs[0];
      } catch (err) {
        if (stopped) return;
        const why = err instanceof DependencyUnavailableError ? 'the signer or the database is unavailable' : err instanceof Error ? err.message : String(err);
        warn.warn(`carry-over:${why}`, { err: why, retryInMs: retry }, `signer carry-over: ${why}; trying again`);
        await pause(retry);
        retry = Math.min(retry * 2, timing.retryMs[1]);
      }
    }
  })();

  return {
    gate: (project) => {
      if (documentsCarried) return refusedProjects.size > 0 && refusedProjects.has(project) ? Promise.reject(new CarryOverRefusedError()) : undefined;
      let timer: NodeJS.Timeout | undefined;
      return Promise.race([
        documents.then(() => (refusedProjects.has(project) ? Promise.reject(new CarryOverRefusedError()) : undefined)),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new SignerUpgradingError()), WAIT_MS);
        }),
      ]).finally(() => clearTimeout(timer));
    },
    done,
    stop: async () => {
      stopped = true;
      wake();
      await done;
    },
  };
}

async function pending(db: Knex): Promise<{ documents: number; keys: number }> {
  const { rows } = await db.raw<{ rows: Array<{ documents: number; keys: number }> }>(
    `SELECT count(*) FILTER (WHERE wallet_id IS NULL)::int AS documents, count(*) FILTER (WHERE wallet_id IS NOT NULL)::int AS keys
       FROM signer_carry_over WHERE refused IS NULL`,
  );
  return rows[0] ?? { documents: 0, keys: 0 };
}

async function refusedDocumentProjects(db: Knex): Promise<string[]> {
  const { rows } = await db.raw<{ rows: Array<{ uid: string }> }>(
    `SELECT ${projectUidOf('c.project_id')} AS uid FROM signer_carry_over c WHERE c.wallet_id IS NULL AND c.refused IS NOT NULL`,
  );
  return rows.map((r) => r.uid);
}

async function carryDocuments(db: Knex, signer: SignerClient, log: Logger, stopped: () => boolean): Promise<void> {
  while (!stopped()) {
    const { rows } = await db.raw<{ rows: Array<{ id: number; project_id: number; uid: ProjectUid }> }>(
      `SELECT c.id, c.project_id, ${projectUidOf('c.project_id')} AS uid FROM signer_carry_over c
        WHERE c.wallet_id IS NULL AND c.refused IS NULL ORDER BY c.id LIMIT 100`,
    );
    if (rows.length === 0) return;
    for (const row of rows) {
      if (stopped()) return;
      try {
        const carried = await signer.carryDocuments(row.uid, row.project_id);
        log.info({ projectId: row.project_id, uid: row.uid, ...carried }, `project ${row.project_id}: its signer documents are under ${row.uid}`);
        await db('signer_carry_over').where({ id: row.id }).delete();
      } catch (err) {
        // A conflict stays one however often it is tried; anything else may pass (the signer back, or upgraded).
        if (!(err instanceof CarryOverConflictError)) throw err;
        const refusal = `carry_over_conflict: ${err.message}`;
        log.error({ projectId: row.project_id, uid: row.uid, err: refusal }, `project ${row.project_id}: the carry-over of its signer documents was refused`);
        await db('signer_carry_over').where({ id: row.id }).update({ refused: refusal });
      }
    }
  }
}

async function carryKeys(db: Knex, signer: SignerClient, log: Logger, stopped: () => boolean): Promise<void> {
  while (!stopped()) {
    const { rows } = await db.raw<{ rows: Array<{ id: number; project_id: number; uid: ProjectUid; wallet_id: number; key_id: string }> }>(
      // Both columns are foreign keys (NOT NULL for the project): a subquery finds what a join did.
      `SELECT c.id, c.project_id, ${projectUidOf('c.project_id')} AS uid, c.wallet_id, ${walletKeyIdOf('c.wallet_id')} AS key_id
         FROM signer_carry_over c
        WHERE c.wallet_id IS NOT NULL AND c.refused IS NULL ORDER BY c.project_id, c.id LIMIT ?`,
      [KEYS_PER_CALL],
    );
    if (rows.length === 0) return;
    // One call per project of the batch (rows come ordered by project).
    for (const batch of groupBy(rows, (r) => r.project_id)) {
      if (stopped()) return;
      const first = batch[0];
      if (!first) continue;
      const outcomes = await signer.carryKeys(
        first.uid,
        first.project_id,
        batch.map((r) => r.key_id),
      );
      const done: number[] = [];
      for (const [i, outcome] of outcomes.entries()) {
        const row = batch[i];
        if (!row) continue;
        if (outcome.outcome !== 'refused') {
          done.push(row.id);
          continue;
        }
        const refusal = `${outcome.code}: ${outcome.message}`;
        log.error(
          { projectId: row.project_id, walletId: row.wallet_id, keyId: row.key_id, err: refusal },
          `wallet ${row.wallet_id}: its key was not bound to project ${row.project_id} (${refusal}); it cannot sign`,
        );
        await db('signer_carry_over').where({ id: row.id }).update({ refused: refusal });
      }
      if (done.length > 0) await db('signer_carry_over').whereIn('id', done).delete();
    }
  }
}

function groupBy<T, K>(items: T[], keyOf: (item: T) => K): T[][] {
  const groups: T[][] = [];
  let current: T[] = [];
  let key: K | undefined;
  for (const item of items) {
    const k = keyOf(item);
    if (current.length > 0 && k !== key) {
      groups.push(current);
      current = [];
    }
    key = k;
    current.push(item);
  }
  if (current.length > 0) groups.push(current);
  return groups;
}
