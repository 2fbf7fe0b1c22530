import { Writable } from 'node:stream';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { orderWaitMs } from '../../../src/domains/webhooks/deliver.js';
import { createDb } from '../../../src/platform/db/knex.js';
import { migrateLatest } from '../../../src/platform/db/migrate.js';
import { createLogger } from '../../../src/platform/logging/logger.js';
import { OutboxRegistry } from '../../../src/platform/outbox/registry.js';
import { OutboxRelay } from '../../../src/platform/outbox/relay.js';
import type { FedBatch } from '../../../src/platform/outbox/registry.js';
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

  /** A relay of the test's registry, quiet, its poll a minute away (only wakes lead to claims). */
  const testRelay = (registry: OutboxRegistry, bounds: { concurrency?: number; projectConcurrency?: number } = {}) =>
    new OutboxRelay({
      db,
      log: createLogger('silent', new Writable({ write: (_c, _e, done) => done() })),
      concurrency: bounds.concurrency ?? 8,
      projectConcurrency: bounds.projectConcurrency ?? 8,
      hostConcurrency: 8,
      leaseMs: 30_000,
      claimable: () => 'true',
      databaseUrl: scratch.url,
      registry,
      pollMs: 60_000,
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
    relay = testRelay(registry);
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

  describe('news for the feeders is never lost', () => {
    /** A fed job of the lane `fed` for `project`, as a feeder makes them (no row of its own). */
    const job = (project: number, name: string): ClaimedRow => ({
      id: 0,
      project_id: project,
      kind: 'fed_test',
      delivery_kind: null,
      wallet_id: null,
      subscription_id: null,
      event: null,
      event_id: null,
      url: null,
      payload: null,
      message_id: name,
      status: 'pending',
      attempts: 0,
      next_attempt_at: null,
      last_status: null,
      last_error: null,
      last_response_body: null,
      last_attempt_at: null,
      manual_retry: false,
      destination: null,
      created_at: new Date(),
    });
    const batch = (jobs: ClaimedRow[]): FedBatch => ({ leased: jobs.length, jobs, finish: () => Promise.resolve() });

    /** A relay of one lane: `claims` answers each feeder claim in turn (the poll a minute away, so only wakes lead to claims). */
    function fedRelay(claims: (n: number, busy: readonly number[]) => Promise<FedBatch>, handle: (row: ClaimedRow) => Promise<void>, projectConcurrency = 8) {
      let n = 0;
      const registry = new OutboxRegistry()
        .register({
          kind: 'fed_test',
          lane: 'fed',
          async handle(row: ClaimedRow): Promise<Outcome> {
            await handle(row);
            return { status: 'done', retryInMs: null, attempted: true };
          },
        })
        .feed({ lane: 'fed', claim: (_limit, _lease, busy) => claims(n++, busy) });
      return testRelay(registry, { projectConcurrency });
    }

    it('news that comes while a claim runs leads to another claim, though that one came back short', async () => {
      let inClaim: () => void = () => undefined;
      const claimRunning = new Promise<void>((r) => (inClaim = r));
      let answer: (b: FedBatch) => void = () => undefined;
      const handled: string[] = [];
      const relay = fedRelay(
        async (n) => {
          // 0: the start's claim; 1: a wake's claim, whose snapshot missed a commit whose NOTIFY comes while it runs; 2: the claim that news asks for.
          if (n === 0) return batch([]);
          if (n === 1) {
            inClaim();
            return new Promise<FedBatch>((r) => (answer = r));
          }
          return batch(n === 2 ? [job(projectId, 'late')] : []);
        },
        (row) => {
          handled.push(row.message_id);
          return Promise.resolve();
        },
      );
      try {
        await relay.start();
        relay.wake(true);
        await claimRunning;
        relay.wake(true);
        answer(batch([]));
        expect(await until('the job of the later news handled', () => (handled.length > 0 ? handled : undefined), 10_000)).to.deep.equal(['late']);
      } finally {
        await relay.stop();
      }
    });

    it('a claim that returns after stop() began gives its jobs back (unstarted), and stop() waits for that', async () => {
      let inClaim: () => void = () => undefined;
      const claimRunning = new Promise<void>((r) => (inClaim = r));
      let answer: (b: FedBatch) => void = () => undefined;
      const finished: Array<Array<Outcome | undefined>> = [];
      const handled: string[] = [];
      const relay = fedRelay(
        (n) => {
          if (n === 0) return Promise.resolve(batch([]));
          inClaim();
          return new Promise<FedBatch>((r) => (answer = r));
        },
        (row) => {
          handled.push(row.message_id);
          return Promise.resolve();
        },
      );
      await relay.start();
      relay.wake(true);
      await claimRunning;
      let stopped = false;
      const stopping = relay.stop().then(() => (stopped = true));
      await new Promise((r) => setImmediate(r));
      expect(stopped, 'stop() waits for the claim in flight').to.equal(false);
      answer({
        leased: 1,
        jobs: [job(projectId, 'taken')],
        finish: (outcomes) => {
          finished.push([...outcomes.values()]);
          return Promise.resolve();
        },
      });
      await stopping;
      expect(handled, 'nothing is started once stopping').to.deep.equal([]);
      expect(finished, 'the batch is finished before stop() resolves, its job not tried').to.deep.equal([[undefined]]);
    });

    it('a project a claim skipped at its bound is claimed for again when its attempt ends', async () => {
      let release: () => void = () => undefined;
      const released = new Promise<void>((r) => (release = r));
      const busyAt: Array<readonly number[]> = [];
      const handled: string[] = [];
      const relay = fedRelay(
        (n, busy) => {
          busyAt.push(busy);
          if (n === 0) return Promise.resolve(batch([job(projectId, 'first')]));
          // The project's next recorded row is skipped while the project is at its bound.
          return Promise.resolve(batch(busy.includes(projectId) || handled.includes('second') ? [] : [job(projectId, 'second')]));
        },
        async (row) => {
          if (row.message_id === 'first') await released;
          handled.push(row.message_id);
        },
        1,
      );
      try {
        await relay.start();
        // News while the project's one slot is taken: its claim skips the project.
        await until(
          'a claim with the project busy',
          () => {
            if (busyAt.some((b) => b.includes(projectId))) return true;
            relay.wake(true);
            return undefined;
          },
          10_000,
        );
        release();
        expect(await until('the skipped project served', () => (handled.length === 2 ? handled : undefined), 10_000)).to.deep.equal(['first', 'second']);
      } finally {
        await relay.stop();
      }
    });
  });

  it('rows of a project a claim skipped at its bound (its work in flight and buffered) are claimed when its attempt ends', async () => {
    // One slot in all, two per project: the project's second row waits in the buffer, and counts toward its bound.
    let release: () => void = () => undefined;
    const released = new Promise<void>((r) => (release = r));
    const handled: string[] = [];
    const registry = new OutboxRegistry().register({
      kind: 'skip_test',
      lane: 'skip',
      async handle(row: ClaimedRow): Promise<Outcome> {
        if (row.message_id === 'r1') await released;
        handled.push(row.message_id);
        return { status: 'done', retryInMs: null, attempted: true };
      },
    });
    await db('outbox').insert(
      ['r1', 'r2', 'r3'].map((name, i) => ({
        project_id: projectId,
        kind: 'skip_test',
        message_id: name,
        status: 'pending',
        next_attempt_at: db.raw(`now() - make_interval(secs => ?)`, [3 - i]),
      })),
    );
    const skipRelay = testRelay(registry, { concurrency: 1, projectConcurrency: 2 });
    try {
      await skipRelay.start();
      await until('two rows claimed, one in flight', async () => {
        const leased = await db('outbox').where({ kind: 'skip_test' }).whereNotNull('locked_until').count<Array<{ count: string }>>('* as count');
        return Number(leased[0]?.count) === 2 ? true : undefined;
      });
      // News while the project is at its bound: the claim skips its third row.
      skipRelay.wake(true);
      await new Promise((r) => setTimeout(r, 200));
      release();
      expect(await until('all three handled', () => (handled.length === 3 ? handled : undefined), 10_000)).to.deep.equal(['r1', 'r2', 'r3']);
    } finally {
      await skipRelay.stop();
    }
  });
});
