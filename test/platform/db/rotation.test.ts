import { expect } from 'chai';
import { Rotation, type KeyRange, type RotatingList } from '../../../src/platform/db/rotation.js';
import { lastQueueWithWork, lastUnsettled, queuesWithWork, unsettled, type QueueKey } from '../../../src/domains/transactions/repository.js';
import { testDb } from '../../support/db.js';

/** A list ordered by key, read as a repository reads a table. */
const listOf = (rows: () => number[]): RotatingList<number, number> => ({
  read: (range: KeyRange<number>, limit: number) =>
    Promise.resolve(
      rows()
        .filter((k) => (range.after === undefined || k > range.after) && (range.through === undefined || k <= range.through))
        .sort((a, b) => a - b)
        .slice(0, limit),
    ),
  last: () => Promise.resolve(rows().length === 0 ? undefined : Math.max(...rows())),
  keyOf: (k) => k,
});

describe('a background pass over bounded work (Rotation)', () => {
  it('looks at every row within ⌈rows / limit⌉ passes while the first ones stay (taking the first `limit` each time never reached them)', async () => {
    // Rows 1–4 never leave (a tenant's sends waiting for funds); the others leave once looked at.
    const stuck = [1, 2, 3, 4];
    let rest = [5, 6, 7, 8, 9, 10];
    const rotation = new Rotation<number>();
    const seen = new Set<number>();
    for (let pass = 0; pass < Math.ceil(10 / 4); pass++) {
      const window = await rotation.next(
        4,
        listOf(() => [...stuck, ...rest]),
      );
      expect(window.length, 'a full window each pass').to.equal(4);
      for (const k of window) seen.add(k);
      rest = rest.filter((k) => !window.includes(k));
    }
    expect([...seen].sort((a, b) => a - b)).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it('comes back to an old row while new rows keep arriving at the end as fast as a pass takes them (going on after the last row only chased them)', async () => {
    // Row 1 stays; each pass the rows it took leave and as many new ones arrive after the greatest key.
    let rows = [1, 2, 3, 4, 5, 6];
    let next = 7;
    const rotation = new Rotation<number>();
    let seenOne = 0;
    for (let pass = 0; pass < 2 * Math.ceil(6 / 2) + 1; pass++) {
      const window = await rotation.next(
        2,
        listOf(() => rows),
      );
      if (window.includes(1)) seenOne++;
      rows = rows.filter((k) => k === 1 || !window.includes(k));
      while (rows.length < 6) rows.push(next++);
    }
    expect(seenOne, 'row 1 looked at again').to.be.greaterThan(1);
  });

  it('wraps round within a pass, takes no row twice in one window, and starts again from the start after a short window', async () => {
    const list = listOf(() => [10, 20, 30, 40, 50]);
    const rotation = new Rotation<number>();
    expect(await rotation.next(2, list)).to.deep.equal([10, 20]);
    expect(await rotation.next(2, list)).to.deep.equal([30, 40]);
    expect(await rotation.next(2, list)).to.deep.equal([50, 10]);
    expect(await rotation.next(2, list)).to.deep.equal([20, 30]);
    expect(await rotation.next(10, list)).to.deep.equal([40, 50, 10, 20, 30]);
    // That window held every row: the next one starts at the start.
    expect(await rotation.next(2, list)).to.deep.equal([10, 20]);
    expect(
      await new Rotation<number>().next(
        2,
        listOf(() => []),
      ),
    ).to.deep.equal([]);
  });

  it('under random arrivals and departures, no row present for two cycles of ⌈most rows / limit⌉ passes goes unseen', async () => {
    let seed = 7;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
    for (let run = 0; run < 200; run++) {
      const limit = 1 + Math.floor(random() * 5);
      const most = 30;
      // Arrivals after the greatest key (ids), or anywhere in the key space (queues by address).
      const anywhere = run % 2 === 1;
      let next = 1;
      let rows: number[] = [];
      const rotation = new Rotation<number>();
      /** Since which pass each row has been present and unseen. */
      const unseenSince = new Map<number, number>();
      for (let pass = 0; pass < 80; pass++) {
        rows = rows.filter(() => random() > 0.1);
        while (rows.length < most && random() < 0.8) {
          const k = anywhere ? Math.floor(random() * 1e9) : next++;
          if (!rows.includes(k)) rows.push(k);
        }
        for (const k of rows) if (!unseenSince.has(k)) unseenSince.set(k, pass);
        for (const k of [...unseenSince.keys()]) if (!rows.includes(k)) unseenSince.delete(k);
        const window = await rotation.next(
          limit,
          listOf(() => rows),
        );
        expect(new Set(window).size, 'no row twice in a window').to.equal(window.length);
        expect(window.length, 'a full window while there are rows enough').to.equal(Math.min(limit, rows.length));
        for (const k of window) unseenSince.delete(k);
        for (const [k, since] of unseenSince) expect(pass - since, `row ${k} (limit ${limit}, run ${run})`).to.be.lessThan(2 * Math.ceil(most / limit) + 1);
      }
    }
  });

  describe('the transactions passes, on PostgreSQL', () => {
    const CHAINS = [990_001, 990_002];
    let organisationId: number;

    before(async () => {
      const db = testDb();
      const [org] = await db('organisations').insert({ name: 'rotation' }).returning<Array<{ id: number }>>('id');
      organisationId = org!.id;
      const [project] = await db('projects')
        .insert({
          organisation_id: organisationId,
          name: 'rotation',
          environment: 'testnet',
          issuer: 'https://rotation.example',
          wallet_webhook_secret_enc: 'unused',
        })
        .returning<Array<{ id: number }>>('id');
      const [wallet] = await db('wallets')
        .insert({ project_id: project!.id, email: 'rotation@example.com', email_lower: 'rotation@example.com' })
        .returning<Array<{ id: number }>>('id');
      const row = (chain: number, address: string, status: string) => ({
        organisation_id: organisationId,
        project_id: project!.id,
        wallet_id: wallet!.id,
        chain_id: chain,
        from_address: address,
        value: '0',
        data: Buffer.alloc(0),
        kind: 'send',
        caller: 'server',
        actor: 'test',
        status,
        expires_at: new Date(Date.now() + 3_600_000),
      });
      const addresses = ['0x01', '0x02', '0x03', '0x04', '0x05'];
      await db('transactions').insert([
        ...CHAINS.flatMap((c) => addresses.map((a) => row(c, a, 'queued'))),
        ...addresses.flatMap((a) => [row(CHAINS[0]!, a, 'submitted'), row(CHAINS[0]!, a, 'mined'), row(CHAINS[0]!, a, 'confirmed')]),
      ]);
    });
    after(async () => {
      // Rows of their own, removed in the order their keys allow.
      const db = testDb();
      await db('transactions').where({ organisation_id: organisationId }).delete();
      const projects = db('projects').where({ organisation_id: organisationId }).select('id');
      await db('wallets').whereIn('project_id', projects).delete();
      await db('projects').where({ organisation_id: organisationId }).delete();
      await db('organisations').where({ id: organisationId }).delete();
    });

    it("a chain's unsettled transactions: each settling pass resumes after the last one's window", async () => {
      const db = testDb();
      const all = (await unsettled(db, CHAINS[0]!, {}, 100)).map((r) => r.id);
      expect(all).to.have.length(10);
      expect((await unsettled(db, CHAINS[0]!, { after: all[2]!, through: all[5]! }, 100)).map((r) => r.id)).to.deep.equal(all.slice(3, 6));
      const rotation = new Rotation<number>();
      const windows: number[][] = [];
      const list: RotatingList<{ id: number }, number> = {
        read: (range, limit) => unsettled(db, CHAINS[0]!, range, limit),
        last: () => lastUnsettled(db, CHAINS[0]!),
        keyOf: (r) => r.id,
      };
      for (let pass = 0; pass < 4; pass++) windows.push((await rotation.next(3, list)).map((r) => r.id));
      expect(windows).to.deep.equal([all.slice(0, 3), all.slice(3, 6), all.slice(6, 9), [all[9]!, all[0]!, all[1]!]]);
    });

    it('queues with queued sends: each sending pass resumes after the last one, across chains', async () => {
      const db = testDb();
      const everyQueue = await queuesWithWork(db, {}, 10_000);
      const mine = everyQueue.filter((q) => CHAINS.includes(q.chain_id));
      expect(mine).to.have.length(10);
      const rotation = new Rotation<QueueKey>();
      const seen: QueueKey[] = [];
      const list: RotatingList<QueueKey, QueueKey> = {
        read: (range, limit) => queuesWithWork(db, range, limit),
        last: () => lastQueueWithWork(db),
        keyOf: (q) => q,
      };
      for (let pass = 0; pass < Math.ceil(everyQueue.length / 3); pass++) seen.push(...(await rotation.next(3, list)));
      const key = (q: QueueKey) => `${q.chain_id}:${q.from_address}`;
      expect(seen.slice(0, everyQueue.length).map(key), 'every queue once, in key order').to.deep.equal(everyQueue.map(key));
      expect(seen).to.have.length(Math.ceil(everyQueue.length / 3) * 3);
    });
  });
});
