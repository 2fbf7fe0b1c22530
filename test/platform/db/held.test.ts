import { expect } from 'chai';
import type { Knex } from 'knex';
import { createDb, hotQuery } from '../../../src/platform/db/knex.js';
import { GroupCommit } from '../../../src/platform/db/group-commit.js';
import { besideRequest, NestedAcquisitionError, outsideRequests, watchPool, watchRequest } from '../../../src/platform/db/held.js';
import { testDatabaseUrl } from '../../support/db.js';
import { until } from '../../support/wait.js';

/** The detector of src/platform/db/held.ts, which the test app puts around every request (test/support/app.ts). */
describe('db: a request never asks the pool for a connection while it holds one', function () {
  this.timeout(30_000);
  let db: Knex;
  before(() => {
    // Two connections and a short acquire timeout: a nesting the detector missed would show as a stall, not pass.
    db = createDb({ url: testDatabaseUrl(), poolMax: 2, acquireTimeoutMs: 2_000 });
    watchPool(db);
  });
  after(() => db.destroy());

  /** Runs `work` as one watched request; answers what it threw (or undefined) and every breach heard. */
  async function asRequest(work: () => Promise<unknown>): Promise<{ thrown: unknown; heard: NestedAcquisitionError[] }> {
    const heard: NestedAcquisitionError[] = [];
    let thrown: unknown;
    await watchRequest(
      (err) => heard.push(err),
      async () => {
        try {
          await work();
        } catch (err) {
          thrown = err;
        }
      },
    );
    return { thrown, heard };
  }

  it('trips on a query through the pool inside a transaction (what the old idempotency middleware did)', async () => {
    const { thrown, heard } = await asRequest(() =>
      db.transaction(async (tx) => {
        await tx.raw('SELECT 1');
        await db.raw('SELECT 2');
      }),
    );
    expect(thrown).to.be.instanceOf(NestedAcquisitionError);
    expect(heard).to.have.length(1);
    expect(heard[0]?.message).to.match(/holds 1 pooled connection/);
  });

  it('trips on a transaction opened while another is open, and on a prepared hot query inside one', async () => {
    const nestedTx = await asRequest(() => db.transaction(async () => db.transaction(async (inner) => inner.raw('SELECT 1'))));
    expect(nestedTx.thrown).to.be.instanceOf(NestedAcquisitionError);
    const hot = await asRequest(() => db.transaction(async () => hotQuery(db, 'held_test_one', 'SELECT $1::int AS n', [1])));
    expect(hot.thrown).to.be.instanceOf(NestedAcquisitionError);
  });

  it('counts work a request starts beside itself (a queue turn that goes on after the answer) as a flow of its own, which trips on its own nesting only', async () => {
    let release: (() => void) | undefined;
    let beside: Promise<unknown> = Promise.resolve();
    const request = await asRequest(async () => {
      // The flow holds a connection in a transaction while the request goes on and takes its own.
      beside = besideRequest(() => db.transaction(async (tx) => tx.raw('SELECT 1').then(() => new Promise<void>((r) => (release = r)))));
      await until('the flow holds its connection', () => release !== undefined && (db.client as { pool: { numUsed(): number } }).pool.numUsed() === 1);
      await db.raw('SELECT 1');
      release?.();
      await beside;
    });
    expect(request.thrown).to.equal(undefined);
    expect(request.heard).to.deep.equal([]);
    // Nesting inside the flow is still caught.
    const nested = await asRequest(() => besideRequest(() => db.transaction(async () => db.raw('SELECT 1'))));
    expect(nested.thrown).to.be.instanceOf(NestedAcquisitionError);
  });

  it('trips on waiting for a group commit while holding a connection', async () => {
    const group = new GroupCommit<number>(async (rows) => {
      await db.raw('SELECT ?::int', [rows.length]);
    });
    const { thrown } = await asRequest(() => db.transaction(async () => group.add(1)));
    expect(thrown).to.be.instanceOf(NestedAcquisitionError);
  });

  it('lets a request take connections one after another, and a transaction use its own connection (savepoints too)', async () => {
    const { thrown, heard } = await asRequest(async () => {
      await db.raw('SELECT 1');
      await hotQuery(db, 'held_test_two', 'SELECT $1::int AS n', [2]);
      await db.transaction(async (tx) => {
        await tx.raw('SELECT 1');
        await hotQuery(tx, 'held_test_three', 'SELECT $1::int AS n', [3]);
        await tx.transaction(async (savepoint) => savepoint.raw('SELECT 1'));
      });
      await db.raw('SELECT 1');
    });
    expect(thrown).to.equal(undefined);
    expect(heard).to.deep.equal([]);
  });

  it("counts a group commit's statement as no request's, whichever request's turn started it", async () => {
    const opened: Array<() => void> = [];
    const group = new GroupCommit<number>(
      async () => {
        await db.transaction(async (tx) => {
          await tx.raw('SELECT 1');
          await new Promise<void>((resolve) => opened.push(resolve));
        });
      },
      { parallel: 1 },
    );
    // A's row is written first; B's waits, and its statement starts from A's turn once A's is done.
    const a = asRequest(async () => {
      await group.add(1);
      await until("B's statement open", () => opened.length === 2);
      await db.raw('SELECT 1');
    });
    const b = asRequest(() => group.add(2));
    await until("A's statement open", () => opened.length === 1);
    opened[0]?.();
    const first = await a;
    opened[1]?.();
    expect(first.thrown).to.equal(undefined);
    expect((await b).thrown).to.equal(undefined);
    // Work started from a request's turn but outside it holds nothing of the request's either.
    const detached = await asRequest(async () => {
      let inner: Promise<unknown> = Promise.resolve();
      await db.transaction(async (tx) => {
        await tx.raw('SELECT 1');
        // `then` runs the query now (a knex builder is lazy), outside the request.
        inner = outsideRequests(() => db.raw('SELECT 1').then(() => undefined));
      });
      await inner;
    });
    expect(detached.thrown).to.equal(undefined);
  });

  it('watches nothing outside a request', async () => {
    await db.transaction(async () => {
      await db.raw('SELECT 1');
    });
  });
});
