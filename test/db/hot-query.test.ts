import { expect } from 'chai';
import { createDb, hotQuery, type Knex } from '../../src/db/knex.js';
import { hashSecret } from '../../src/crypto/secrets.js';
import { findProjectAndWallet } from '../../src/tenancy/project-key.js';
import { startApp, type TestApp } from '../support/app.js';
import { testDatabaseUrl } from '../support/db.js';
import { createTenant } from '../support/factories.js';

describe('hot-path queries (db/knex.ts hotQuery)', () => {
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
