import { expect } from 'chai';
import type { Knex } from 'knex';
import { createDb } from '../../../src/platform/db/knex.js';
import { migrateLatest } from '../../../src/platform/db/migrate.js';
import { claimDue, claimDueStatement, type Claim } from '../../../src/platform/outbox/repository.js';
import { tenantActive } from '../../../src/access/tenancy/quiet.js';
import { scratchDatabase } from '../../support/process.js';

interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

/** Rows of `outbox` every scan of the plan read (returned or filtered out), over all its loops. */
function outboxRowsRead(node: PlanNode): number {
  const own = node['Relation Name'] === 'outbox' ? (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops'] : 0;
  return own + (node.Plans ?? []).reduce((sum, child) => sum + outboxRowsRead(child), 0);
}

const BACKLOG = 5_000;
const DEAD = 'dead.example:443';

/**
 * The relay's claim (src/platform/outbox/repository.ts) against a table where most due rows cannot be
 * taken: a dead endpoint's backlog (its host at its bound), a busy project's rows, a deleted
 * organisation's. What it takes, and what it reads to find it.
 */
describe('Outbox claim: due rows behind a busy host, project or quiet tenant', () => {
  let scratch: Awaited<ReturnType<typeof scratchDatabase>>;
  let db: Knex;
  const projects: Record<'dead' | 'live' | 'busy' | 'quiet', number> = { dead: 0, live: 0, busy: 0, quiet: 0 };

  before(async () => {
    scratch = await scratchDatabase();
    db = createDb({ url: scratch.url, poolMax: 2 });
    await migrateLatest(db);
    for (const name of Object.keys(projects) as Array<keyof typeof projects>) {
      const [org] = await db('organisations')
        .insert({ name, deleted_at: name === 'quiet' ? db.fn.now() : null })
        .returning('id');
      const [project] = await db('projects')
        .insert({ organisation_id: org.id, name, environment: 'testnet', issuer: 'https://issuer.invalid', wallet_webhook_secret_enc: 'unused' })
        .returning('id');
      projects[name] = Number(project.id);
    }
    const rows = (project: number, destination: string, count: number, tag: string) =>
      db.raw(
        `INSERT INTO outbox (project_id, kind, delivery_kind, destination, url, status, next_attempt_at, message_id)
         SELECT ?, 'delivery', 'subscription', ?, 'https://' || ? || '/hook', 'pending', now() - make_interval(secs => 600 - g * 0.01), ? || g
           FROM generate_series(1, ?) g`,
        [project, destination, destination, tag, count],
      );
    // The oldest due rows of all are the dead endpoint's, then the busy and the quiet projects'.
    await rows(projects.dead, DEAD, BACKLOG, 'dead-');
    await rows(projects.busy, 'busy.example:443', 500, 'busy-');
    await rows(projects.quiet, 'quiet.example:443', 500, 'quiet-');
    for (let host = 0; host < 6; host++) await rows(projects.live, `live${host}.example:443`, 20, `live${host}-`);
    await db.raw('ANALYZE outbox');
  });

  after(async () => {
    await db.destroy();
    await scratch.drop();
  });

  const claim = (over: Partial<Claim> = {}): Claim => ({
    kinds: [{ kind: 'delivery', deliveryKind: 'subscription' }],
    limit: 64,
    perGroup: 16,
    leaseMs: 60_000,
    busyHosts: [DEAD],
    busyProjects: [projects.busy],
    claimable: tenantActive,
    ...over,
  });

  it('reads about a row per group and the rows it takes, not the rows it must leave', async () => {
    const undo = new Error('undo');
    let read = 0;
    const done = db.transaction(async (tx) => {
      const { sql, bindings } = claimDueStatement(claim());
      const { rows } = await tx.raw<{ rows: Array<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }> }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, bindings);
      const plan = rows[0]?.['QUERY PLAN'][0]?.Plan;
      if (!plan) throw new Error('no plan');
      read = outboxRowsRead(plan);
      throw undo; // the EXPLAIN leased rows: give them back
    });
    await done.catch((err: unknown) => {
      if (err !== undo) throw err;
    });
    // 9 groups found, 6 × 16 candidates (each read by its group's scan, then locked and leased).
    expect(read, `outbox rows read with ${BACKLOG + 1_000} due rows left behind`).to.be.within(1, 400);
  });

  it("takes the oldest due rows of the other groups, at most perGroup each, leases them, and leaves the dead host's, busy project's and quiet tenant's", async () => {
    const first = await claimDue(db, claim());
    expect(first).to.have.length(64);
    expect(new Set(first.map((r) => r.project_id))).to.deep.equal(new Set([projects.live]));
    const perHost = new Map<string, number>();
    for (const r of first) perHost.set(r.destination ?? '', (perHost.get(r.destination ?? '') ?? 0) + 1);
    expect(Math.max(...perHost.values())).to.be.at.most(16);
    // The oldest: each host's first rows (its rows fall due in message order).
    for (const r of first) expect(Number(r.message_id.split('-')[1])).to.be.at.most(16);

    // Leased: a second claim takes the rest of the live rows and none of the first claim's.
    const second = await claimDue(db, claim());
    expect(second).to.have.length(6 * 20 - 64);
    expect(second.map((r) => r.id)).to.not.include.members(first.map((r) => r.id));
    expect(await claimDue(db, claim())).to.deep.equal([]);

    // Once the host and the project are below their bounds, their rows are taken, oldest first.
    const freed = await claimDue(db, claim({ busyHosts: [], busyProjects: [] }));
    expect(freed).to.have.length(32);
    expect(new Set(freed.map((r) => r.project_id))).to.deep.equal(new Set([projects.dead, projects.busy]));
  });
});
