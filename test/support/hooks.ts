import { createDb } from '../../src/platform/db/knex.js';
import { migrateLatest } from '../../src/platform/db/migrate.js';
import { adminQuery as admin, databaseUrlFor, setTestDatabase, testDb } from './db.js';
import { removeImageLayout } from './image.js';
import { checkObservedResponses } from './openapi-check.js';
import { setSharedSigner, sharedSigner, startSigner } from './signer.js';

const name = `custody_test_${Date.now()}_${process.pid}`;

/** Root hooks: one fresh, migrated database per test run on the machine's PostgreSQL, dropped at the end. */
export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(60_000);
    await admin(`CREATE DATABASE ${name}`);
    const url = databaseUrlFor(name);
    const db = createDb({ url, poolMax: 10 });
    await migrateLatest(db);
    setTestDatabase(url, db);
    setSharedSigner(await startSigner());
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(120_000);
    // Every response the suites saw must be one the OpenAPI document describes.
    await checkObservedResponses();
    await sharedSigner().destroy();
    await testDb().destroy();
    await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    removeImageLayout();
  },
};
