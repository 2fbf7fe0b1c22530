import { expect } from 'chai';
import type { Knex } from 'knex';
import { createDb, hotQuery, poolState } from '../../../src/platform/db/knex.js';
import { besideRequest, outsideRequests } from '../../../src/platform/db/held.js';
import { asTenant, tenantShare } from '../../../src/platform/db/share.js';
import { toAppError } from '../../../src/platform/http/problem.js';
import { testDatabaseUrl } from '../../support/db.js';
import { until } from '../../support/wait.js';

const LOCK = 7_300_001;

/** src/platform/db/share.ts: one tenant's requests never hold the whole pool. */
describe("db: a tenant's share of the pool", function () {
  this.timeout(30_000);
  let db: Knex;
  let holder: Knex;
  before(() => {
    db = createDb({ url: testDatabaseUrl(), poolMax: 4, acquireTimeoutMs: 1_500 });
    holder = createDb({ url: testDatabaseUrl(), poolMax: 2 });
  });
  after(async () => {
    await db.destroy();
    await holder.destroy();
  });

  /** Holds an advisory lock on a connection of its own until the answer's release is called. */
  async function holdLock(): Promise<() => Promise<void>> {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const done = holder.transaction(async (tx) => {
      await tx.raw('SELECT pg_advisory_xact_lock(?)', [LOCK]);
      locked();
      await released;
    });
    await isLocked;
    return async () => {
      release();
      await done;
    };
  }

  it('leaves a quarter of the pool (at least one connection) to the other tenants', () => {
    expect([1, 2, 4, 10, 20].map(tenantShare)).to.deep.equal([1, 1, 3, 8, 15]);
  });

  it("serves another tenant while one tenant's requests all wait on a lock; the waiting ones go on when it is released", async () => {
    const release = await holdLock();
    // Eight transactions of one tenant queue on the lock (twice the pool).
    const blocked = Array.from({ length: 8 }, (_, i) =>
      asTenant('organisation:1', () =>
        db.transaction(async (tx) => {
          await tx.raw('SELECT pg_advisory_xact_lock(?)', [LOCK]);
          return i;
        }),
      ).then(
        (v) => ({ ok: v }),
        (err: unknown) => ({ err }),
      ),
    );
    try {
      await until('the first tenant holds its share', async () => {
        const { rows } = await holder.raw<{ rows: Array<{ n: number }> }>(
          "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = ?",
          [LOCK],
        );
        return rows[0]?.n === tenantShare(4) ? true : undefined;
      });
      // The other five wait for the tenant's share, not in the pool's queue; what the metrics read says so.
      await until('the rest wait for the share', () => (poolState(db)?.shareWaits === 8 - tenantShare(4) ? true : undefined));
      expect(poolState(db)?.pendingAcquires).to.equal(0);
      // Another tenant, a request that is no tenant's (the worker), and the pool's own hot path all get a connection now.
      expect(await asTenant('organisation:2', () => db.raw('SELECT 2 AS n'))).to.have.nested.property('rows[0].n', 2);
      expect(await outsideRequests(() => db.raw('SELECT 3 AS n'))).to.have.nested.property('rows[0].n', 3);
      expect(await asTenant('organisation:2', () => hotQuery<{ n: number }>(db, 'share-test', 'SELECT $1::int AS n', [4]))).to.deep.equal([{ n: 4 }]);
    } finally {
      await release();
    }
    const outcomes = await Promise.all(blocked);
    // Those that waited for their share past the acquire timeout are refused as the pool's own timeout is: 503.
    for (const o of outcomes) {
      if ('ok' in o) continue;
      expect(toAppError(o.err)?.status, String(o.err)).to.equal(503);
    }
    expect(outcomes.filter((o) => 'ok' in o).length).to.be.at.least(tenantShare(4));
  });

  it('lets a request that holds a slot take another connection without waiting for its own share (nesting breaks a rule, it must not hang)', async () => {
    // As many requests as the share, each holding a transaction and then asking the pool for more.
    const nested = await Promise.all(
      Array.from({ length: tenantShare(4) }, (_, i) =>
        asTenant('organisation:4', () =>
          db.transaction(async (tx) => {
            await tx.raw('SELECT 1');
            return (await db.raw<{ rows: Array<{ n: number }> }>('SELECT ?::int AS n', [i])).rows[0]?.n;
          }),
        ),
      ),
    );
    expect(nested).to.deep.equal([0, 1, 2]);
    expect(poolState(db)?.shareWaits).to.equal(0);
  });

  it("counts work a request starts beside itself (a queue turn after its answer) in the tenant's share: the requests and their flows together hold at most the share", async () => {
    const release = await holdLock();
    const lock = () => db.transaction((tx) => tx.raw('SELECT pg_advisory_xact_lock(?)', [LOCK]));
    // Each request holds its connection when it starts its flow, whose connection is then asked for.
    const work = Array.from({ length: tenantShare(4) }, () =>
      asTenant('organisation:5', async () => {
        let flow: Promise<unknown> = Promise.resolve();
        await db.transaction(async (tx) => {
          await tx.raw('SELECT 1');
          flow = besideRequest(lock);
          await tx.raw('SELECT pg_advisory_xact_lock(?)', [LOCK]);
        });
        // Waited for once the request's own connection is given back (never while holding it).
        await flow;
      }),
    );
    try {
      // Three of the six connections asked for are held (the share), the rest wait for it.
      await until('the share held and the rest waiting for it', () => ((poolState(db)?.shareWaits ?? 0) >= 1 ? true : undefined), 5_000);
      expect(poolState(db)?.used).to.equal(tenantShare(4));
      // The pool's last connection is free for another tenant meanwhile.
      const other = await asTenant('organisation:6', () => db.raw<{ rows: Array<{ one: number }> }>('SELECT 1 AS one'));
      expect(other.rows[0]?.one).to.equal(1);
    } finally {
      await release();
      await Promise.allSettled(work);
    }
    expect((await Promise.allSettled(work)).map((o) => o.status)).to.deep.equal(Array<string>(tenantShare(4)).fill('fulfilled'));
  });

  it('gives a slot back on every outcome: a failed statement, a rolled-back transaction', async () => {
    for (let i = 0; i < 3 * tenantShare(4); i++) {
      await asTenant('organisation:3', () => db.raw('SELECT * FROM no_such_table')).catch(() => undefined);
      await asTenant('organisation:3', () => db.transaction(() => Promise.reject(new Error('rolled back')))).catch(() => undefined);
    }
    // Every slot is free again: as many concurrent transactions as the share all run at once.
    const release = await holdLock();
    const waiting = Array.from({ length: tenantShare(4) }, () =>
      asTenant('organisation:3', () => db.transaction((tx) => tx.raw('SELECT pg_advisory_xact_lock(?)', [LOCK]))),
    );
    await until('all of the share waiting on the lock', async () => {
      const { rows } = await holder.raw<{ rows: Array<{ n: number }> }>(
        "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = ?",
        [LOCK],
      );
      return rows[0]?.n === tenantShare(4) ? true : undefined;
    });
    await release();
    await Promise.all(waiting);
  });
});
