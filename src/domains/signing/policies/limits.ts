import type { Knex } from 'knex';
import type { Clock } from '../../../platform/runtime/clock.js';
import type { Executor } from '../../../platform/db/knex.js';
import type { ProjectUid, SignerClient } from '../../../platform/signer/client.js';
import { LIMIT_WINDOWS, readLimit, type PolicyLimit } from '../../../../contract/index.js';
import { deleteInBatches } from '../../../platform/db/batches.js';

/**
 * Rolling-window limits of a project's policy (docs/signing.md): counters shared by every API process,
 * so they live in PostgreSQL and are kept here, not in the signer. A limit counts the signatures
 * its method made in the last window, per wallet or per project.
 */
export type Limit = PolicyLimit;

/** The longest window: older signatures count for nothing. */
const LONGEST_WINDOW_S = Math.max(...Object.values(LIMIT_WINDOWS));

/** How a denial names a limit, as a rule is named. */
export const limitName = (l: Limit): string =>
  l.wei !== undefined ? `limit: ${l.wei} wei of ${l.method} per ${l.per} per ${l.window}` : `limit: ${l.count} ${l.method} per ${l.per} per ${l.window}`;

function readLimits(policy: unknown): Limit[] {
  const limits = (policy as { limits?: unknown }).limits ?? [];
  if (!Array.isArray(limits)) throw new Error('the signer answered a policy whose limits are not a list');
  return limits.map((v) => {
    // Read as the signer read it when the policy was written (the contract's one reading).
    const read = typeof v === 'object' && v !== null ? readLimit(v as Record<string, unknown>) : undefined;
    if (!read?.ok) throw new Error('the signer answered a policy with an unreadable limit');
    return read.limit;
  });
}

/**
 * The limits of each project's newest policy, as the signer holds it, read again when older than
 * `refreshMs` (the signer's own refresh): a version written through this process applies at once
 * (`forget`), one written through another API process within `refreshMs`.
 */
export class PolicyLimits {
  readonly #known = new Map<ProjectUid, { at: number; limits: Limit[] }>();

  constructor(
    private readonly signer: Pick<SignerClient, 'getPolicy'>,
    private readonly now: Clock,
    private readonly refreshMs = 1_000,
  ) {}

  /** The limits on `method` of the project's newest policy (kept by the project's uid, as the signer keeps it). */
  async of(project: ProjectUid, method: string): Promise<Limit[]> {
    let known = this.#known.get(project);
    if (!known || this.now() - known.at >= this.refreshMs) {
      const policy = await this.signer.getPolicy(project);
      known = { at: this.now(), limits: policy ? readLimits(policy.policy) : [] };
      this.#known.set(project, known);
    }
    return known.limits.filter((l) => l.method === method);
  }

  forget(project: ProjectUid): void {
    this.#known.delete(project);
  }
}

/**
 * Takes a place under every limit of the method, or answers the first limit that is full. The
 * project's places for a method are counted and taken under one transaction lock, so concurrent
 * requests cannot both take the last one. The place is the signature's row: released when the
 * signer does not sign. A budget (`wei`) counts the places' costs: a transaction's maximum cost is
 * taken whole before it is signed, so a budget is never exceeded; a replacement's place
 * (`replacing`) is not counted against it, and goes when the replacement is signed (only one of
 * the two can be mined).
 */
export async function reserveSignature(
  db: Knex,
  at: { projectId: number; walletId: number; method: string; cost?: bigint; replacing?: number },
  limits: readonly Limit[],
  now: Date,
): Promise<{ reserved: number } | { full: Limit }> {
  return db.transaction(async (tx) => {
    await tx.raw(`SELECT pg_advisory_xact_lock(hashtext('custody:signature-limits:' || ?::text || ':' || ?::text))`, [at.projectId, at.method]);
    for (const limit of limits) {
      const since = new Date(now.getTime() - LIMIT_WINDOWS[limit.window] * 1000);
      const column = limit.per === 'wallet' ? 'wallet_id' : 'project_id';
      const owner = limit.per === 'wallet' ? at.walletId : at.projectId;
      if (limit.wei !== undefined) {
        const { rows } = await tx.raw<{ rows: Array<{ spent: string }> }>(
          `SELECT coalesce(sum(cost), 0)::text AS spent FROM wallet_signatures WHERE ${column} = ? AND method = ? AND created_at > ? AND id <> ?`,
          [owner, at.method, since, at.replacing ?? 0],
        );
        if (BigInt(rows[0]?.spent ?? '0') + (at.cost ?? 0n) > limit.wei) return { full: limit };
        continue;
      }
      const { rows } = await tx.raw<{ rows: Array<{ n: string }> }>(
        `SELECT count(*) AS n FROM (SELECT 1 FROM wallet_signatures WHERE ${column} = ? AND method = ? AND created_at > ? AND id <> ? LIMIT ?) s`,
        [owner, at.method, since, at.replacing ?? 0, limit.count ?? 0],
      );
      if (Number(rows[0]?.n ?? 0) >= (limit.count ?? 0)) return { full: limit };
    }
    const [row] = await tx('wallet_signatures')
      .insert({ project_id: at.projectId, wallet_id: at.walletId, method: at.method, created_at: now, cost: at.cost?.toString() ?? null })
      .returning<Array<{ id: string }>>('id');
    return { reserved: Number(row?.id) };
  });
}

/** Gives a place back: the signer did not sign. */
export async function releaseSignature(db: Executor, id: number): Promise<void> {
  await db('wallet_signatures').where({ id }).delete();
}

/** Deletes signatures older than the longest window, `batch` at a time until none is left (deleteInBatches). */
export async function pruneSignatures(db: Executor, batch = 5_000): Promise<number> {
  return deleteInBatches(async (n) => {
    const { rowCount } = await db.raw<{ rowCount: number }>(
      `DELETE FROM wallet_signatures WHERE id IN (
         SELECT id FROM wallet_signatures WHERE created_at < now() - make_interval(secs => ?) ORDER BY id LIMIT ?)`,
      [LONGEST_WINDOW_S, n],
    );
    return rowCount;
  }, batch);
}
