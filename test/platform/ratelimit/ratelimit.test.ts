import { expect } from 'chai';
import { startApp, type TestApp } from '../../support/app.js';
import { createTenant } from '../../support/factories.js';
import { freePort } from '../../support/process.js';
import { randomUUID } from 'node:crypto';
import { createLogger } from '../../../src/platform/logging/logger.js';
import { PgRateLimitStore, RateLimiter, RedisRateLimitStore, type RateLimitStore } from '../../../src/platform/ratelimit/limiter.js';
import { testDb } from '../../support/db.js';
import { until } from '../../support/wait.js';

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
      expect(over.problem.code).to.equal('rate_limited');
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
      expect(over.problem.code).to.equal('rate_limited');
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

  it("keeps limiting on each process's own counts (and logs it) when Redis is unreachable; never a 5xx", async () => {
    const app = await startApp({ RATE_LIMIT_TOKEN: '2', RATE_LIMIT_FLUSH_MS: '10', REDIS_URL: `redis://127.0.0.1:${await freePort()}` });
    try {
      const t = await createTenant(app.client);
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) statuses.push((await t.orgRead.get('/api/v1/organisations')).status);
      expect(statuses).to.deep.equal([200, 200, 429]);
      await until('the store failure logged', () => Promise.resolve(app.logs.join('').includes('rate-limit store unavailable')));
    } finally {
      await app.close();
    }
  });
});

/** A clock for the limiter alone (seconds, as a fraction). */
const clock = (startS: number) => {
  const c = { s: startS, now: () => c.s * 1000 };
  return c;
};
const silent = createLogger('fatal');

for (const backend of ['postgresql', 'redis'] as const) {
  describe(`the sliding window and reconciliation across processes (${backend})`, () => {
    let store: RateLimitStore;
    before(async () => {
      store = backend === 'redis' ? new RedisRateLimitStore(REDIS_URL, `custody-test:${randomUUID()}`) : new PgRateLimitStore(testDb());
      // Redis is used without an offline queue: wait until the connection is up.
      await until('the store answers', () =>
        store.add([{ key: 'warm-up', windowStart: 0, hits: 1 }], 60).then(
          () => true,
          () => false,
        ),
      );
    });
    after(() => store.close());

    it('does not admit twice the limit at a window boundary', async () => {
      const c = clock(1_000_000 * 60 + 59);
      const limiter = new RateLimiter(store, 60, silent, c.now, 0);
      const key = `boundary:${randomUUID()}`;
      let admitted = 0;
      for (let i = 0; i < 10; i++) if (!limiter.check(key, 10)?.exceeded) admitted++;
      await limiter.flush();
      expect(admitted).to.equal(10);
      // Two seconds later, in the next fixed window: a fixed window would admit 10 more.
      c.s += 2;
      for (let i = 0; i < 10; i++) if (!limiter.check(key, 10)?.exceeded) admitted++;
      expect(admitted, 'admitted within 2 s around the boundary').to.be.at.most(11);
      // As the old window slides out, room comes back in proportion.
      c.s += 30;
      let later = 0;
      for (let i = 0; i < 10; i++) if (!limiter.check(key, 10)?.exceeded) later++;
      expect(later).to.be.within(4, 6);
      await limiter.close();
    });

    it("two processes on one store overshoot by at most one flush interval's hits each", async () => {
      const c = clock(2_000_000 * 60 + 1);
      const a = new RateLimiter(store, 60, silent, c.now, 0);
      const b = new RateLimiter(store, 60, silent, c.now, 0);
      const key = `shared:${randomUUID()}`;
      const perFlush = 10;
      let admitted = 0;
      // Each process flushes after every `perFlush` of its own requests; they interleave.
      for (let round = 0; round < 30; round++) {
        for (const limiter of [a, b]) {
          for (let i = 0; i < perFlush; i++) if (!limiter.check(key, 100)?.exceeded) admitted++;
          await limiter.flush();
        }
      }
      expect(admitted).to.be.at.least(100);
      expect(admitted, 'limit + one flush interval per process').to.be.at.most(100 + 2 * perFlush);
      await a.close();
      await b.close();
    });
  });
}

describe('failed authentication is limited per client address', () => {
  it('unknown API tokens and unknown project keys count; past the limit the address gets 429, even with a valid token', async () => {
    const app = await startApp({ RATE_LIMIT_AUTH_FAILURES: '3', RATE_LIMIT_FLUSH_MS: '10' });
    try {
      const t = await createTenant(app.client);
      expect((await app.client.withToken('sk_test_guess-1').get('/api/v1/organisations')).status).to.equal(401);
      expect((await app.client.withToken('sk_test_guess-2').get('/api/v1/organisations')).status).to.equal(401);
      expect((await app.client.withToken('x').post('/api/v1/signin', { key: 'pk_test_guess-3' })).status).to.equal(400);
      // The address is over (three failures): its next guess is not even looked at.
      expect((await app.client.withToken('x').post('/api/v1/signin', { key: 'pk_test_guess-4' })).status).to.equal(429);
      const blocked = await t.orgRead.get('/api/v1/organisations');
      expect(blocked.status).to.equal(429);
      expect(blocked.problem.code).to.equal('rate_limited');
      expect(Number(blocked.headers.get('retry-after'))).to.be.greaterThan(0);
      const signin = await app.client.withToken('x').post('/api/v1/signin', { key: t.project.projectKey });
      expect(signin.status).to.equal(429);
    } finally {
      await app.close();
    }
  });
});
