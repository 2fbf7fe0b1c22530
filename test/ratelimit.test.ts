import { expect } from 'chai';
import { startApp, type TestApp } from './helpers/app.js';
import { createTenant } from './helpers/factories.js';
import { freePort } from './helpers/process.js';

/** The machine's Redis (as CI finds it); the PostgreSQL store needs nothing. */
const REDIS_URL = process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';

for (const backend of ['postgresql', 'redis'] as const) {
  describe(`rate limits per API token and per project key (${backend})`, () => {
    let app: TestApp;
    before(async () => {
      app = await startApp({
        RATE_LIMIT_TOKEN: '5',
        RATE_LIMIT_PROJECT: '3',
        RATE_LIMIT_WINDOW_S: '3600',
        ...(backend === 'redis' ? { REDIS_URL } : {}),
      });
    });
    after(() => app.close());

    it('counts each API token on its own, says so in RateLimit-* headers, and answers 429 with Retry-After past the limit', async () => {
      const t = await createTenant(app.client);
      const path = `/api/v1/project/${t.project.id}`;
      for (let i = 0; i < 5; i++) {
        const res = await t.projectRead.get(path);
        expect(res.status).to.equal(200);
        expect(res.headers.get('ratelimit-limit')).to.equal('5');
        expect(res.headers.get('ratelimit-remaining')).to.equal(String(4 - i));
        expect(Number(res.headers.get('ratelimit-reset'))).to.be.within(1, 3600);
      }
      const over = await t.projectRead.get(path);
      expect(over.status).to.equal(429);
      expect(over.headers.get('content-type')).to.match(/^application\/problem\+json/);
      expect(over.body.code).to.equal('rate_limited');
      expect(Number(over.headers.get('retry-after'))).to.be.within(1, 3600);
      expect(over.headers.get('ratelimit-remaining')).to.equal('0');
      // Another token of the same tenant has its own count; the operator's token is not limited.
      expect((await t.projectAdmin.get(path)).status).to.equal(200);
      for (let i = 0; i < 7; i++) expect((await app.client.get(path)).status).to.equal(200);
      // Writes are refused too, and change nothing.
      const rename = await t.projectRead.put(path, { name: 'renamed' });
      expect(rename.status).to.equal(429);
    });

    it('counts the wallet endpoints per project, before the JWT is verified', async () => {
      const t = await createTenant(app.client);
      const call = () => app.client.withToken('not-a-jwt').post('/api/v1/signin', { key: t.project.projectKey });
      for (let i = 0; i < 3; i++) {
        const res = await call();
        expect(res.status).to.equal(401);
        expect(res.headers.get('ratelimit-remaining')).to.equal(String(2 - i));
      }
      const over = await call();
      expect(over.status).to.equal(429);
      expect(over.body.code).to.equal('rate_limited');
      // A bad project key is refused (400) before anything is counted.
      const bad = await app.client.withToken('x').post('/api/v1/signin', { key: 'pk_test_unknown' });
      expect(bad.status).to.equal(400);
      expect(bad.headers.get('ratelimit-limit')).to.equal(null);
      // Another project is not affected.
      const other = await createTenant(app.client);
      expect((await app.client.withToken('not-a-jwt').post('/api/v1/signin', { key: other.project.projectKey })).status).to.equal(401);
    });
  });
}

describe('rate limits, off and degraded', () => {
  it('sends no RateLimit headers when limits are off (0)', async () => {
    const app = await startApp({ RATE_LIMIT_TOKEN: '0' });
    try {
      const t = await createTenant(app.client);
      const res = await t.orgRead.get('/api/v1/organisations');
      expect(res.status).to.equal(200);
      expect(res.headers.get('ratelimit-limit')).to.equal(null);
    } finally {
      await app.close();
    }
  });

  it('lets requests through (and logs it) when Redis is unreachable, rather than failing them', async () => {
    const app = await startApp({ RATE_LIMIT_TOKEN: '1', REDIS_URL: `redis://127.0.0.1:${await freePort()}` });
    try {
      const t = await createTenant(app.client);
      for (let i = 0; i < 3; i++) expect((await t.orgRead.get('/api/v1/organisations')).status).to.equal(200);
      expect(app.logs.join('')).to.include('rate-limit store unavailable');
    } finally {
      await app.close();
    }
  });
});
