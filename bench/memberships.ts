import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createDb } from '../src/platform/db/knex.js';
import { LOCK_HOLDERS_SQL, viewQuery } from '../src/domains/memberships/repository.js';
import { seedMemberships, seedWallets } from '../scripts/seed-memberships.js';
import { Client } from '../test/support/http.js';
import { freePort, spawnService } from '../test/support/process.js';
import { startStack } from '../test/support/stack.js';
import { closedLoop, writeResult } from './stats.js';

/**
 * Memberships against ROLE=all on a scratch database: issuing 1,000 items in one call, and the
 * view by wallet with 1,000,000 memberships in the project (seeded with one bulk INSERT). The
 * plans of the queries the figures rely on are written beside the figures.
 */
const SEED = Number(process.env['BENCH_MEMBERSHIPS'] ?? 1_000_000);
const PER_WALLET = 5;
const ISSUE_CALLS = Number(process.env['BENCH_ISSUE_CALLS'] ?? 30);
const VIEW_CALLS = Number(process.env['BENCH_VIEW_CALLS'] ?? 3_000);

const hexAddress = () => `0x${randomBytes(20).toString('hex')}`;

const stack = await startStack('bench-memberships');
const port = await freePort();
const svc = spawnService({
  ...stack.serviceEnv(port),
  // The benchmark measures the service, not its rate limits.
  RATE_LIMIT_TOKEN: '0',
  RATE_LIMIT_PROJECT: '0',
  DB_POOL_MAX: '20',
});
const db = createDb({ url: stack.db.url, poolMax: 2 });
const pgClient = new pg.Client({ connectionString: stack.db.url });
try {
  await svc.waitFor(/listening on http/, 60_000);
  await pgClient.connect();
  const operator = new Client(`http://127.0.0.1:${port}`, stack.operatorToken);
  const org = await operator.post('/api/v1/organisations', { name: 'Bench' });
  const project = await operator.post(`/api/v1/organisations/${org.body.id}/projects`, { name: 'p', issuer: 'https://idp.example.com' });
  const projectId = project.body.id;
  const token = await operator.post(`/api/v1/organisations/${org.body.id}/tokens`, { name: 'bench', role: 'admin', projectId });
  const api = operator.withToken(token.body.token);

  const seedStarted = Date.now();
  await seedMemberships(stack.db.url, projectId, SEED, PER_WALLET);
  const seedSeconds = (Date.now() - seedStarted) / 1000;
  console.log(`seeded ${SEED} memberships in ${seedSeconds.toFixed(1)} s`);

  // Issue: 1,000 new memberships per call (fresh wallets each time), one call at a time.
  const issueOnce = async () => {
    const items = Array.from({ length: 1_000 }, (_, i) => ({
      membershipType: `bench:t${i % 3}`,
      walletAddress: hexAddress(),
      expiration: 0,
      transferable: true,
    }));
    const r = await api.post('/api/v1/membership/issue', items);
    if (r.status !== 201) throw new Error(`issue answered ${r.status}: ${r.text.slice(0, 300)}`);
  };
  await closedLoop(3, 1, issueOnce);
  const issue = await closedLoop(ISSUE_CALLS, 1, issueOnce);
  console.log(`issue 1,000 items per call: p50 ${issue.p50Ms.toFixed(1)} ms, p99 ${issue.p99Ms.toFixed(1)} ms (goal p50 <= 150 ms)`);

  // View by wallet among the seeded ones.
  const wallets = await seedWallets(
    pgClient,
    Array.from({ length: 500 }, () => Math.floor(Math.random() * (SEED / PER_WALLET))),
  );
  const viewOnce = async (i: number) => {
    const r = await api.get(`/api/v1/membership/view?walletAddress=${wallets[i % wallets.length] ?? ''}`);
    if (r.status !== 200 || r.body.memberships.length !== PER_WALLET) throw new Error(`view answered ${r.status}: ${r.text.slice(0, 300)}`);
  };
  await closedLoop(300, 1, viewOnce);
  const view = await closedLoop(VIEW_CALLS, 1, viewOnce);
  console.log(`view by wallet, one at a time: p50 ${view.p50Ms.toFixed(2)} ms, p99 ${view.p99Ms.toFixed(2)} ms (goal p99 <= 10 ms)`);
  const view8 = await closedLoop(VIEW_CALLS, 8, viewOnce);
  console.log(`view by wallet, 8 in flight: ${view8.perSecond.toFixed(0)} req/s, p50 ${view8.p50Ms.toFixed(2)} ms, p99 ${view8.p99Ms.toFixed(2)} ms`);

  // The plans behind those figures: the view's own query (built by the service's code) and the
  // issue's place lock over 1,000 pairs.
  const explain = async (sql: string, bindings: unknown[] = []) => {
    const { rows } = await pgClient.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${sql}`, bindings);
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  };
  const nowS = Math.floor(Date.now() / 1000);
  const viewSql = viewQuery(db, projectId, { walletLower: wallets[0], includeRevoked: false, includeExpired: false }, nowS, {
    afterId: 0,
    limit: 100,
  }).toQuery();
  const typeSql = viewQuery(db, projectId, { membershipType: 'seed:3', includeRevoked: false, includeExpired: false }, nowS, {
    afterId: 0,
    limit: 100,
  }).toQuery();
  const pairs = await seedWallets(
    pgClient,
    Array.from({ length: 1_000 }, (_, i) => i * 37),
  );
  await pgClient.query('BEGIN');
  let n = 0;
  const lockPlan = await explain(
    LOCK_HOLDERS_SQL.replace(/\?/g, () => `$${++n}`),
    [pairs, pairs.map(() => 'seed:1'), projectId],
  );
  await pgClient.query('ROLLBACK');
  const plans = {
    viewByWallet: { sql: viewSql, plan: await explain(viewSql) },
    viewByType: { sql: typeSql, plan: await explain(typeSql) },
    issueLockPlaces: { plan: lockPlan },
  };
  for (const [name, p] of Object.entries(plans)) console.log(`\n-- ${name}\n${p.plan}`);

  const file = writeResult('memberships', {
    seeded: { memberships: SEED, perWallet: PER_WALLET, seconds: seedSeconds },
    issue1000: { ...issue, goalP50Ms: 150, calls: ISSUE_CALLS },
    viewByWallet: { ...view, goalP99Ms: 10, concurrency: 1 },
    viewByWallet8: { ...view8, concurrency: 8 },
    plans,
  });
  console.log(`results: ${file}`);
} finally {
  svc.proc.kill('SIGTERM');
  await svc.exited;
  await pgClient.end().catch(() => undefined);
  await db.destroy();
  await stack.teardown();
}
