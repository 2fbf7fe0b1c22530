import { Writable } from 'node:stream';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { orderWaitMs } from '../../../src/domains/webhooks/deliver.js';
import { createDb } from '../../../src/platform/db/knex.js';
import { migrateLatest } from '../../../src/platform/db/migrate.js';
import { createLogger } from '../../../src/platform/logging/logger.js';
import { OutboxRegistry } from '../../../src/platform/outbox/registry.js';
import { OutboxRelay } from '../../../src/platform/outbox/relay.js';
import type { ClaimedRow, Outcome } from '../../../src/platform/outbox/repository.js';
import { scratchDatabase } from '../../support/process.js';
import { until } from '../../support/wait.js';

/**
 * Rows settled to be tried again sooner than the relay's poll (platform/outbox/lane.ts): each is
 * tried again at its time, however their due times interleave, with the poll a minute away.
 */
describe('Outbox relay: a row to be tried again soon is tried when it is due, not at the next poll', function () {
  this.timeout(60_000);
  let scratch: Awaited<ReturnType<typeof scratchDatabase>>;
  let db: Knex;
  let relay: OutboxRelay | undefined;
  let projectId = 0;

  before(async () => {
    scratch = await scratchDatabase();
    db = createDb({ url: scratch.url, poolMax: 4 });
    await migrateLatest(db);
    const [org] = await db('organisations').insert({ name: 'due' }).returning('id');
    const [project] = await db('projects')
      .insert({ organisation_id: org.id, name: 'due', environment: 'testnet', issuer: 'https://issuer.invalid', wallet_webhook_secret_enc: 'unused' })
      .returning('id');
    projectId = Number(project.id);
  });
  after(async () => {
    await relay?.stop();
    await db.destroy();
    await scratch.drop();
  });

  it('tries each again at its time: a later due time behind an earlier one, and an earlier one after a later one', async () => {
    // Each row's first attempt ends after `after` ms and asks to be tried again in `retry` ms; the second is done.
    const plan: Record<string, { after: number; retry: number }> = {
      a: { after: 0, retry: 300 },
      b: { after: 100, retry: 300 },
      c: { after: 50, retry: 900 },
      d: { after: 400, retry: 100 },
    };
    const attempts = new Map<string, number[]>();
    const registry = new OutboxRegistry().register({
      kind: 'due_test',
      lane: 'test',
      async handle(row: ClaimedRow): Promise<Outcome> {
        const name = row.message_id ?? '';
        const seen = attempts.get(name) ?? [];
        seen.push(Date.now());
        attempts.set(name, seen);
        const step = plan[name]!;
        if (seen.length > 1) return { status: 'done', retryInMs: null, attempted: true };
        await new Promise((r) => setTimeout(r, step.after));
        return { status: 'pending', retryInMs: step.retry, attempted: true };
      },
    });
    await db('outbox').insert(
      Object.keys(plan).map((name) => ({ project_id: projectId, kind: 'due_test', message_id: name, status: 'pending', next_attempt_at: db.fn.now() })),
    );
    relay = new OutboxRelay({
      db,
      log: createLogger('silent', new Writable({ write: (_c, _e, done) => done() })),
      concurrency: 8,
      projectConcurrency: 8,
      hostConcurrency: 8,
      leaseMs: 30_000,
      claimable: () => 'true',
      databaseUrl: scratch.url,
      registry,
      pollMs: 60_000,
    });
    await relay.start();
    const done = await until(
      'every row tried twice',
      async () => {
        const rows = await db('outbox').where({ kind: 'due_test' }).select<Array<{ status: string }>>('status');
        return rows.every((r) => r.status === 'done') ? rows : undefined;
      },
      15_000,
    );
    expect(done).to.have.length(4);
    for (const [name, step] of Object.entries(plan)) {
      const [first, second] = attempts.get(name) ?? [];
      expect(second, `${name} tried again`).to.be.a('number');
      // Not before its time; well before the poll.
      expect(second! - first!, name).to.be.within(step.after + step.retry - 20, step.after + step.retry + 5_000);
    }
  });

  it('an event waiting for an earlier one of its stream looks again soon at first, then less often, at least once a second', () => {
    expect([0, 1_000, 2_000, 60_000, 3_600_000].map(orderWaitMs)).to.deep.equal([250, 250, 500, 1_000, 1_000]);
  });
});
