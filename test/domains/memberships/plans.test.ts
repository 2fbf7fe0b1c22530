import { expect } from 'chai';
import type { Knex } from 'knex';
import { createDb } from '../../../src/platform/db/knex.js';
import { migrateLatest } from '../../../src/platform/db/migrate.js';
import { LOCK_HOLDERS_SQL, lockHolders } from '../../../src/domains/memberships/repository.js';
import { scratchDatabase } from '../../support/process.js';

interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

/** Rows of `memberships` every scan of the plan read (returned or filtered out), over all its loops. */
function membershipRowsRead(node: PlanNode): number {
  const own =
    node['Relation Name'] === 'memberships'
      ? (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0) + (node['Rows Removed by Index Recheck'] ?? 0)) * node['Actual Loops']
      : 0;
  return own + (node.Plans ?? []).reduce((sum, child) => sum + membershipRowsRead(child), 0);
}

const wallet = (n: number) => `0x${n.toString(16).padStart(40, '0')}`;
const HELD = 8_000;
const PLACES = 500;

/**
 * The place lock of an issue (a probe per place) must read about one row per place whatever the
 * table's statistics say: a project's first big imports run before autovacuum has analysed
 * anything, and all of a batch's items usually share one type, which makes the by-type index look
 * as good as any to a planner that has no numbers.
 */
describe('Membership place lookups: plans', () => {
  let scratch: Awaited<ReturnType<typeof scratchDatabase>>;
  let db: Knex;
  let projectId: number;

  before(async () => {
    scratch = await scratchDatabase();
    db = createDb({ url: scratch.url, poolMax: 2 });
    await migrateLatest(db);
    // Statistics change only when this test says so.
    await db.raw('ALTER TABLE memberships SET (autovacuum_enabled = false)');
    const [org] = await db('organisations').insert({ name: 'plans' }).returning('id');
    const [project] = await db('projects')
      .insert({ organisation_id: org.id, name: 'plans', environment: 'testnet', issuer: 'https://issuer.invalid', wallet_webhook_secret_enc: 'unused' })
      .returning('id');
    projectId = Number(project.id);
  });

  after(async () => {
    await db.destroy();
    await scratch.drop();
  });

  const fill = (from: number, to: number) =>
    db.raw(
      `INSERT INTO memberships (project_id, membership_type, wallet_address, wallet_lower, holds_slot)
       SELECT ?, 'club:one', w, w, true FROM (SELECT '0x' || lpad(to_hex(g), 40, '0') AS w FROM generate_series(?::int, ?::int) g) s`,
      [projectId, from, to],
    );

  /** Half the places are held (the last wallets filled), half are new; one type for all, as a batch has. */
  const places = () =>
    Array.from({ length: PLACES }, (_, i) => ({ walletLower: wallet(i < PLACES / 2 ? HELD - i : HELD + 1 + i), membershipType: 'club:one' }));

  async function check(state: string): Promise<void> {
    const asked = places();
    const undo = new Error('undo');
    const done = db.transaction(async (tx) => {
      const { rows } = await tx.raw<{ rows: Array<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }> }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${LOCK_HOLDERS_SQL}`, [
        asked.map((p) => p.walletLower),
        asked.map((p) => p.membershipType),
        projectId,
      ]);
      const plan = rows[0]?.['QUERY PLAN'][0]?.Plan;
      if (!plan) throw new Error('no plan');
      const read = membershipRowsRead(plan);
      // One probe per place and the held rows fetched and locked: a few rows per place at most.
      expect(read, `${state}: memberships rows read for ${PLACES} places`).to.be.at.most(3 * PLACES);
      const holders = await lockHolders(tx, projectId, asked, Math.floor(Date.now() / 1000));
      expect(holders.map((h) => h.wallet_lower).sort(), state).to.deep.equal(
        asked
          .slice(0, PLACES / 2)
          .map((p) => p.walletLower)
          .sort(),
      );
      throw undo; // nothing locked stays locked, nothing changes
    });
    await done.then(
      () => expect.fail('the transaction was meant to roll back'),
      (err: unknown) => {
        if (err !== undo) throw err;
      },
    );
  }

  it('reads about one row per place: never analysed, analysed when small, analysed when full', async () => {
    await fill(1, HELD);
    await check('never analysed');
    await db.raw('TRUNCATE memberships CASCADE');
    await fill(1, 10);
    await db.raw('ANALYZE memberships');
    await fill(11, HELD);
    await check('analysed at 10 rows');
    await db.raw('ANALYZE memberships');
    await check('analysed');
  });
});
