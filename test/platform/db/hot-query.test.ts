import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { createDb, hotQuery, type Knex } from '../../../src/platform/db/knex.js';
import { hashSecret } from '../../../src/platform/crypto/secrets.js';
import { findProjectAndWallet } from '../../../src/access/tenancy/project-key.js';
import { findLiveTokensByHash, type LiveToken } from '../../../src/domains/tokens/repository.js';
import type { ProjectRow } from '../../../src/domains/projects/repository.js';
import { findVisibleProject, visibleProjects } from '../../../src/access/tenancy/visible.js';
import { findProjectWallet } from '../../../src/domains/wallets/repository.js';
import { attemptsOf, attemptsOfMany, queuedOf, reloadTransaction, unsettled } from '../../../src/domains/transactions/repository.js';
import type { Principal } from '../../../src/access/auth/principal.js';
import { startApp, type TestApp } from '../../support/app.js';
import { testDatabaseUrl } from '../../support/db.js';
import { createTenant } from '../../support/factories.js';

describe('hot-path queries (platform/db/knex.ts hotQuery)', () => {
  let app: TestApp;
  let unprepared: Knex;
  before(async () => {
    app = await startApp();
    unprepared = createDb({ url: testDatabaseUrl(), poolMax: 2, preparedStatements: false });
  });
  after(async () => {
    await unprepared.destroy();
    await app.close();
  });

  it('reads the same rows prepared (the default), unprepared and inside a transaction, with placeholders reused out of order', async () => {
    const sql = 'SELECT $2::int AS b, $1::text AS a, $2::int + 1 AS c';
    const want = [{ b: 2, a: 'x', c: 3 }];
    // Several times on the pool: a named statement is prepared once per connection, then reused.
    for (let i = 0; i < 7; i++) expect(await hotQuery(app.db, 'custody_test_hot', sql, ['x', 2])).to.deep.equal(want);
    expect(await hotQuery(unprepared, 'custody_test_hot', sql, ['x', 2])).to.deep.equal(want);
    expect(await app.db.transaction((tx) => hotQuery(tx, 'custody_test_hot', sql, ['x', 2]))).to.deep.equal(want);
  });

  it("runs inside a transaction on the transaction's own connection, prepared there unless the pool says not to", async () => {
    const sql = 'SELECT count(*)::int AS n FROM pg_temp.hot_scratch';
    const prepared = async (db: Knex) =>
      db.transaction(async (tx) => {
        // A temporary table seen only by this connection, with a row not committed: only the transaction's own connection counts it.
        await tx.raw('CREATE TEMP TABLE hot_scratch (x int) ON COMMIT DROP');
        await tx.raw('INSERT INTO hot_scratch VALUES (1)');
        const rows = await hotQuery<{ n: number }>(tx, 'custody_test_in_tx', sql, []);
        const names = await tx.raw<{ rows: Array<{ name: string }> }>(`SELECT name FROM pg_prepared_statements WHERE name = 'custody_test_in_tx'`);
        return { n: rows[0]?.n, named: names.rows.length === 1 };
      });
    expect(await prepared(app.db)).to.deep.equal({ n: 1, named: true });
    expect(await prepared(unprepared)).to.deep.equal({ n: 1, named: false });
    // A failed statement fails its transaction, which rolls back as any other.
    const before = await app.db.raw<{ rows: Array<{ n: number }> }>('SELECT count(*)::int AS n FROM organisations');
    let failed: unknown;
    try {
      await app.db.transaction(async (tx) => {
        await tx('organisations').insert({ name: 'hot rollback' });
        await hotQuery(tx, 'custody_test_in_tx_bad', 'SELECT * FROM no_such_table_here', []);
      });
    } catch (err) {
      failed = err;
    }
    expect(String(failed)).to.match(/no_such_table_here/);
    const after = await app.db.raw<{ rows: Array<{ n: number }> }>('SELECT count(*)::int AS n FROM organisations');
    expect(after.rows[0]?.n).to.equal(before.rows[0]?.n);
  });

  it("keeps answering on a connection that prepared the transactions' statements after a migration adds a column (an upgrade's old version)", async () => {
    const one = createDb({ url: testDatabaseUrl(), poolMax: 1 });
    const reads = async () => {
      expect(await reloadTransaction(one, 0)).to.equal(undefined);
      expect(await attemptsOf(one, 0)).to.deep.equal([]);
      expect(await attemptsOfMany(one, [0])).to.deep.equal(new Map());
      expect(await queuedOf(one, 0, '0x00', 1)).to.deep.equal([]);
      expect(await unsettled(one, 0, {}, 1)).to.deep.equal([]);
    };
    try {
      await reads();
      await app.db.raw('ALTER TABLE transactions ADD COLUMN upgrade_probe int');
      await app.db.raw('ALTER TABLE transaction_attempts ADD COLUMN upgrade_probe int');
      // A `*` here fails with "cached plan must not change result type" on the connection that prepared it.
      await reads();
    } finally {
      await app.db.raw('ALTER TABLE transactions DROP COLUMN IF EXISTS upgrade_probe');
      await app.db.raw('ALTER TABLE transaction_attempts DROP COLUMN IF EXISTS upgrade_probe');
      await one.destroy();
    }
  });

  it('refuses to run in a transaction that has already ended', async () => {
    let done: Knex.Transaction | undefined;
    await app.db.transaction((tx) => {
      done = tx;
      return Promise.resolve();
    });
    let refused: unknown;
    try {
      await hotQuery(done!, 'custody_test_after_end', 'SELECT 1 AS one', []);
    } catch (err) {
      refused = err;
    }
    expect(String(refused)).to.match(/already complete/);
  });

  it('finds a project by its key and the wallet of an email the same way on all three paths', async () => {
    const t = await createTenant(app.client);
    const hash = hashSecret(t.project.projectKey);
    const viaPool = await findProjectAndWallet(app.db, hash, 'testnet', 'nobody@example.com');
    expect(viaPool?.project.id).to.equal(t.project.id);
    expect(viaPool?.wallet).to.equal(null);
    expect(await findProjectAndWallet(unprepared, hash, 'testnet', 'nobody@example.com')).to.deep.equal(viaPool);
    expect(await app.db.transaction((tx) => findProjectAndWallet(tx, hash, 'testnet', 'nobody@example.com'))).to.deep.equal(viaPool);
    // A key of the other environment finds nothing.
    expect(await findProjectAndWallet(app.db, hash, 'production', undefined)).to.equal(undefined);
  });

  it("authenticates a token, resolves a project and reads a project's wallet the same way on all three paths, by the same rule as the lists", async () => {
    const t = await createTenant(app.client);
    const other = await createTenant(app.client);
    // A wallet row as sign-in leaves it (this suite is about the queries, not the signer).
    const address = `0x${randomBytes(20).toString('hex')}`;
    const [inserted] = await app
      .db<{ id: number; project_id: number; email: string; email_lower: string; address: string; activated_at: unknown }>('wallets')
      .insert({ project_id: t.project.id, email: 'Hot@example.com', email_lower: 'hot@example.com', address, activated_at: app.db.fn.now() })
      .returning('id');
    const walletId = inserted?.id ?? 0;
    const three = async <T>(read: (db: Knex | Knex.Transaction) => Promise<T>): Promise<T> => {
      const viaPool = await read(app.db);
      expect(await read(unprepared)).to.deep.equal(viaPool);
      expect(await app.db.transaction((tx) => read(tx))).to.deep.equal(viaPool);
      return viaPool;
    };

    const principalOf = (tok: LiveToken): Principal =>
      tok.project_id === null
        ? { scope: 'organisation', role: tok.role, tokenId: tok.id, organisationId: tok.organisation_id }
        : { scope: 'project', role: tok.role, tokenId: tok.id, organisationId: tok.organisation_id, projectId: tok.project_id };
    const findLiveTokenByHash = async (db: Knex | Knex.Transaction, hash: Buffer, projectId: number | null = null) =>
      (await findLiveTokensByHash(db, [{ hash, projectId }]))[0];
    const found = await three((db) => findLiveTokenByHash(db, hashSecret(t.tokens.projectAdmin.token)));
    expect(found).to.deep.equal({
      token: { id: t.tokens.projectAdmin.id, organisation_id: t.org.id, project_id: t.project.id, role: 'admin' },
      project: null,
    });
    expect(await three((db) => findLiveTokenByHash(db, hashSecret('no such token'), t.project.id))).to.equal(undefined);

    // Who reaches t's project, read alone, read with the token, and listed: the operator, t's
    // organisation token and t's project token; not the other tenant's.
    const operator: Principal = { scope: 'operator', role: 'admin' };
    const tokens = [t.tokens.orgAdmin, other.tokens.orgAdmin, t.tokens.projectAdmin, other.tokens.projectAdmin];
    const reached = async () => {
      const reaches = async (p: Principal, withToken?: ProjectRow | null) => {
        const hot = await three((db) => findVisibleProject(db, p, t.project.id));
        const listed = (await visibleProjects(app.db, p).where('p.id', t.project.id)) as unknown[];
        expect(hot === undefined ? [] : [hot], p.scope).to.deep.equal(listed);
        if (withToken !== undefined) expect(withToken ?? undefined, p.scope).to.deep.equal(hot);
        return hot !== undefined;
      };
      const found = [await reaches(operator)];
      const each = [];
      for (const tok of tokens) {
        const live = await three((db) => findLiveTokenByHash(db, hashSecret(tok.token), t.project.id));
        each.push(live);
        found.push(live ? await reaches(principalOf(live.token), live.project) : false);
      }
      // Looked up together (as requests that arrive at once are), with an unknown token among them: each answer in its place.
      const lookups = [...tokens.map((tok) => hashSecret(tok.token)), hashSecret('no such token')].map((hash) => ({ hash, projectId: t.project.id }));
      expect(await three((db) => findLiveTokensByHash(db, [lookups[4]!, ...lookups.slice(0, 4)]))).to.deep.equal([undefined, ...each]);
      return found;
    };
    expect(await reached()).to.deep.equal([true, true, false, true, false]);
    // A soft-deleted organisation's project is reached by no one (its tokens are not live), on every path.
    expect((await app.client.delete(`/api/v1/organisations/${t.org.id}`)).status).to.equal(204);
    expect(await reached()).to.deep.equal([false, false, false, false, false]);
    expect((await app.client.post(`/api/v1/organisations/${t.org.id}/undelete`)).status).to.equal(200);
    expect(await reached()).to.deep.equal([true, true, false, true, false]);

    const wallet = await three((db) => findProjectWallet(db, t.project.id, walletId));
    expect(wallet).to.include({ id: walletId, project_id: t.project.id, address, email_lower: 'hot@example.com' });
    // Another project's wallet is not found by id.
    expect(await three((db) => findProjectWallet(db, other.project.id, walletId))).to.equal(undefined);
  });

  it('reports a database error as node-postgres does, and gives the connection back to the pool', async () => {
    // Five failures on a pool of two connections: a connection kept after a failure would leave
    // the last query waiting for one until knex's acquire timeout.
    for (const db of [unprepared, app.db]) {
      for (let i = 0; i < 5; i++) {
        let caught: unknown;
        try {
          await hotQuery(db, 'custody_test_bad', 'SELECT * FROM no_such_table_here', []);
        } catch (err) {
          caught = err;
        }
        expect((caught as { code?: string } | undefined)?.code).to.equal('42P01');
      }
      expect(await hotQuery(db, 'custody_test_ok', 'SELECT 1 AS one', [])).to.deep.equal([{ one: 1 }]);
    }
  });
});
