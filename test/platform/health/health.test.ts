import { expect } from 'chai';
import { createDb } from '../../../src/platform/db/knex.js';
import { startApp } from '../../support/app.js';

describe('health and dependency failures', () => {
  it('answers /healthz and /readyz without auth', async () => {
    const app = await startApp();
    try {
      const live = await app.client.get('/healthz', { token: null });
      expect(live.status).to.equal(200);
      const ready = await app.client.get('/readyz', { token: null });
      expect(ready.status).to.equal(200);
      expect(ready.body.checks.database).to.equal('ok');
      app.lifecycle.draining = true;
      const draining = await app.client.get('/readyz', { token: null });
      expect(draining.status).to.equal(503);
      expect(draining.problem.code).to.equal('service_draining');
      expect(draining.headers.get('retry-after')).to.equal('1');
    } finally {
      await app.close();
    }
  });

  it('answers 503 with Retry-After when the database is unreachable, for readyz and for API calls', async () => {
    // A port nothing listens on: connections are refused at once.
    const down = createDb({ url: 'postgres://postgres@127.0.0.1:9/none', poolMax: 2, acquireTimeoutMs: 2_000 });
    const app = await startApp({}, down);
    try {
      const ready = await app.client.get('/readyz', { token: null });
      expect(ready.status).to.equal(503);
      expect(ready.headers.get('retry-after')).to.match(/^\d+$/);
      expect(ready.problem.code).to.equal('dependency_unavailable');

      // The operator token is checked without the database; the request then needs it.
      const create = await app.client.post('/api/v1/organisations', { name: 'lost?' });
      expect(create.status).to.equal(503);
      expect(create.headers.get('retry-after')).to.match(/^\d+$/);
      expect(create.headers.get('content-type')).to.equal('application/problem+json');
      expect(create.problem.code).to.equal('dependency_unavailable');
      expect(create.text).not.to.match(/ECONNREFUSED|127\.0\.0\.1|stack/);

      const withToken = await app.client.get('/api/v1/organisations', { token: 'sk_test_some_other_token' });
      expect(withToken.status).to.equal(503);
    } finally {
      await app.close();
      await down.destroy();
    }
  });
});
