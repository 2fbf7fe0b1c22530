import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { expect } from 'chai';
import { Writable } from 'node:stream';
import pg from 'pg';
import { until } from '../../support/wait.js';
import { hashSecret } from '../../../src/platform/crypto/secrets.js';
import { createLogger, type Logger } from '../../../src/platform/logging/logger.js';
import { ProjectKeyCache } from '../../../src/access/tenancy/key-cache.js';
import type { CallerProject } from '../../../src/access/tenancy/project-key.js';
import { projectUid } from '../../../src/platform/signer/client.js';
import { startApp, startAppWithIdp, type TestApp } from '../../support/app.js';
import { testDatabaseUrl } from '../../support/db.js';
import { createOrganisation, createProject, type Project } from '../../support/factories.js';
import type { TestIdp, TestIssuer } from '../../support/idp.js';

const AUDIENCE = 'urn:custody:testnet';
const project = (id: number): CallerProject => ({
  id,
  uid: projectUid(randomUUID()),
  organisation_id: 1,
  issuer: 'https://idp.example.com',
  wallet_webhook_url: null,
  require_verified_email: true,
  token_claim_name: null,
  token_claim_value: null,
  audience: null,
});

describe('project-key cache', function () {
  this.timeout(60_000);

  describe('on its own', () => {
    let cache: ProjectKeyCache | undefined;
    afterEach(async () => cache?.stop());

    /** A cache listening on the test database, with its clock in the test's hands. */
    async function listening(
      clock: { now: number },
      options: { probe?: (payload: string) => Promise<void>; probeTimeoutMs?: number; reconnectMs?: number; log?: Logger } = {},
    ): Promise<ProjectKeyCache> {
      cache = new ProjectKeyCache({
        ...(options.reconnectMs === undefined ? {} : { reconnectMs: options.reconnectMs }),
        ...(options.log === undefined ? {} : { log: options.log }),
        ttlMs: 1_000,
        maxEntries: 3,
        databaseUrl: testDatabaseUrl(),
        now: () => clock.now,
        probe:
          options.probe ??
          (async (payload) => {
            const client = new pg.Client({ connectionString: testDatabaseUrl() });
            await client.connect();
            await client.query('SELECT pg_notify($1, $2)', ['custody_projects', payload]);
            await client.end();
          }),
        probeTimeoutMs: options.probeTimeoutMs ?? 5_000,
      });
      await cache.start();
      return cache;
    }

    it('keeps an entry for its lifetime and no longer, and not past its key expiry', async () => {
      const clock = { now: 1_000_000 };
      const c = await listening(clock);
      expect(c.active).to.equal(true);
      c.set('a', project(1), null, c.generation);
      c.set('b', project(2), clock.now + 300, c.generation);
      expect(c.get('a')?.id).to.equal(1);
      expect(c.get('b')?.id).to.equal(2);
      clock.now += 300;
      expect(c.get('b'), 'the key expired').to.equal(undefined);
      expect(c.get('a')?.id).to.equal(1);
      clock.now += 700;
      expect(c.get('a'), 'the lifetime is over').to.equal(undefined);
      expect(c.size).to.equal(0);
    });

    it('keeps at most maxEntries (oldest out first) and nothing read before a change', async () => {
      const clock = { now: 1_000_000 };
      const c = await listening(clock);
      for (const id of [1, 2, 3, 4]) c.set(`k${id}`, project(id), null, c.generation);
      expect(c.size).to.equal(3);
      expect(c.get('k1')).to.equal(undefined);
      expect(c.get('k4')?.id).to.equal(4);
      // A look-up that began before a change does not fill the cache once it ends.
      const before = c.generation;
      c.changed();
      expect(c.size).to.equal(0);
      c.set('k5', project(5), null, before);
      expect(c.get('k5')).to.equal(undefined);
      c.set('k5', project(5), null, c.generation);
      expect(c.get('k5')?.id).to.equal(5);
    });

    it('drops every entry on a NOTIFY from any connection', async () => {
      const clock = { now: 1_000_000 };
      const c = await listening(clock);
      c.set('k', project(1), null, c.generation);
      const other = new pg.Client({ connectionString: testDatabaseUrl() });
      await other.connect();
      await other.query(`NOTIFY custody_projects, 'projects'`);
      await other.end();
      await until('the entry dropped', () => c.get('k') === undefined, 5_000);
      expect(c.size).to.equal(0);
    });

    it('stays off while its probe does not come back (a LISTEN that does not hold, as behind a transaction-mode pooler)', async () => {
      const clock = { now: 1_000_000 };
      const c = await listening(clock, { probe: () => Promise.resolve(), probeTimeoutMs: 100 });
      expect(c.active).to.equal(false);
      c.set('k', project(1), null, c.generation);
      expect(c.get('k')).to.equal(undefined);
      expect(c.size).to.equal(0);
    });

    it('keeps trying to listen while it cannot, and says so once', async () => {
      const lines: string[] = [];
      const log = createLogger('info', new Writable({ write: (chunk: Buffer, _enc, done) => (lines.push(chunk.toString()), done()) }));
      let probes = 0;
      const c = await listening({ now: 0 }, { probe: () => Promise.resolve(void probes++), probeTimeoutMs: 20, reconnectMs: 5, log });
      await until('three more attempts', () => probes >= 4, 10_000);
      await c.stop();
      await new Promise<void>((resolve) => log.flush(() => resolve()));
      expect(c.active).to.equal(false);
      expect(lines.join('').match(/cannot listen for changes/g)).to.have.length(1);
    });
  });

  describe('in the API', () => {
    let withIdp: Awaited<ReturnType<typeof startAppWithIdp>>;
    let idp: TestIdp;
    let a: TestApp;
    let b: TestApp;

    before(async () => {
      // Two API processes on one database. B keeps entries for an hour: whatever it sees of a
      // change, it sees through notifications, never through an entry's lifetime.
      withIdp = await startAppWithIdp();
      ({ app: a, idp } = withIdp);
      b = await startApp({ OIDC_CA_FILE: path.join(withIdp.dir, 'ca.pem'), PROJECT_CACHE_TTL_MS: '3600000' });
      await until('both caches listening', () => a.projectCache?.active && b.projectCache?.active, 10_000);
    });
    after(async () => {
      await b.close();
      await withIdp.close();
    });

    async function setup(): Promise<{ iss: TestIssuer; project: Project; org: { id: number }; jwt: string }> {
      const iss = await idp.issuer();
      const org = await createOrganisation(a.client);
      const p = await createProject(a.client, org.id, { issuer: iss.issuer });
      const jwt = await iss.sign({ email: `user-${p.id}@example.com` }, { audience: AUDIENCE });
      return { iss, project: p, org, jwt };
    }
    const signIn = (app: TestApp, key: string, jwt: string) => app.client.post('/api/v1/signin', { key }, { token: jwt });
    /** Sign-in through `app` until it answers `status`. */
    const untilStatus = (app: TestApp, key: string, jwt: string, status: number) =>
      until(`sign-in answering ${status}`, async () => (await signIn(app, key, jwt)).status === status, 10_000);
    const cached = (app: TestApp, key: string) => app.projectCache?.get(hashSecret(key).toString('base64'));
    /**
     * Signs in through `app` until its cache holds the key (a notification of another test's
     * change arriving during a look-up keeps that look-up's answer out, as it should).
     */
    const warm = (app: TestApp, key: string, jwt: string) =>
      until(
        'the key cached',
        async () => {
          const res = await signIn(app, key, jwt);
          expect(res.status, res.text).to.equal(200);
          return cached(app, key);
        },
        10_000,
      );

    it('answers a known key from the cache: a change made behind its back (no notification) is not seen until one comes', async () => {
      const { project: p, jwt } = await setup();
      expect((await warm(b, p.projectKey, jwt)).id, 'cached after a sign-in').to.equal(p.id);
      // Deleted with the notifying trigger off: B still answers from its entry, which shows the
      // sign-in did not look the project up.
      await b.db.transaction(async (tx) => {
        await tx.raw('ALTER TABLE projects DISABLE TRIGGER projects_notify_projects');
        await tx('projects').where({ id: p.id }).update({ deleted_at: tx.fn.now() });
        await tx.raw('ALTER TABLE projects ENABLE TRIGGER projects_notify_projects');
      });
      expect((await signIn(b, p.projectKey, jwt)).status).to.equal(200);
      // Any notification drops it; the next sign-in reads the database and is refused.
      await b.db.raw(`SELECT pg_notify('custody_projects', 'test')`);
      await untilStatus(b, p.projectKey, jwt, 400);
      expect(cached(b, p.projectKey)).to.equal(undefined);
    });

    it('a project deleted through one process is refused at once by it and, by notification, by the other', async () => {
      const { project: p, jwt } = await setup();
      expect((await warm(a, p.projectKey, jwt)).id).to.equal(p.id);
      expect((await warm(b, p.projectKey, jwt)).id).to.equal(p.id);
      expect((await a.client.delete(`/api/v1/project/${p.id}`)).status).to.equal(204);
      const right = await signIn(a, p.projectKey, jwt);
      expect(right.status, 'the deleting process, at once').to.equal(400);
      expect(right.body).to.include({ code: 'invalid_project_key' });
      await untilStatus(b, p.projectKey, jwt, 400);
    });

    it('an organisation deleted, then undeleted, takes and gives back its keys in both processes', async () => {
      const { project: p, org, jwt } = await setup();
      await warm(b, p.projectKey, jwt);
      expect((await a.client.delete(`/api/v1/organisations/${org.id}`)).status).to.equal(204);
      expect((await signIn(a, p.projectKey, jwt)).status).to.equal(400);
      await untilStatus(b, p.projectKey, jwt, 400);
      expect((await a.client.post(`/api/v1/organisations/${org.id}/undelete`, {})).status).to.equal(200);
      expect((await signIn(a, p.projectKey, jwt)).status).to.equal(200);
      await untilStatus(b, p.projectKey, jwt, 200);
    });

    it('a key rotated with no grace stops at once; the new key works; an issuer change is followed', async () => {
      const { project: p, jwt } = await setup();
      await warm(b, p.projectKey, jwt);
      const rotated = await a.client.post(`/api/v1/project/${p.id}/keys`, { graceSeconds: 0 });
      expect(rotated.status, rotated.text).to.equal(200);
      expect((await signIn(a, p.projectKey, jwt)).status).to.equal(400);
      await untilStatus(b, p.projectKey, jwt, 400);
      expect((await signIn(b, rotated.body.projectKey, jwt)).status).to.equal(200);
      // The project now trusts another issuer: B stops accepting the first issuer's tokens.
      const other = await idp.issuer();
      expect((await a.client.put(`/api/v1/project/${p.id}`, { issuer: other.issuer })).status).to.equal(200);
      await untilStatus(b, rotated.body.projectKey, jwt, 401);
      const fromOther = await other.sign({ email: `user-${p.id}@example.com` }, { audience: AUDIENCE });
      expect((await signIn(b, rotated.body.projectKey, fromOther)).status).to.equal(200);
    });

    it('a key whose grace period ends is refused from the moment it ends, cached or not', async () => {
      const { project: p, jwt } = await setup();
      const rotated = await a.client.post(`/api/v1/project/${p.id}/keys`, { graceSeconds: 2 });
      expect(rotated.status).to.equal(200);
      expect((await warm(b, p.projectKey, jwt)).id, 'the old key, cached during its grace period').to.equal(p.id);
      await until('the grace period over', () => Date.now() >= Date.parse(rotated.body.previousKeysExpireAt), 10_000);
      expect((await signIn(b, p.projectKey, jwt)).status).to.equal(400);
    });

    it('with its notification connection lost it asks the database every time, and caches again once it is back', async () => {
      const { iss, project: p, jwt } = await setup();
      await warm(b, p.projectKey, jwt);
      const pid = b.projectCache?.listenerPid;
      expect(pid).to.be.a('number');
      await a.db.raw('SELECT pg_terminate_backend(?)', [pid ?? 0]);
      await until('the cache off', () => b.projectCache?.active === false, 10_000);
      expect(b.projectCache?.size).to.equal(0);
      // A change nobody is told of: seen at once, since nothing is cached meanwhile. (If the
      // connection is already back, the entry is gone all the same: it was dropped on loss.)
      await b.db.transaction(async (tx) => {
        await tx.raw('ALTER TABLE projects DISABLE TRIGGER projects_notify_projects');
        await tx('projects').where({ id: p.id }).update({ require_verified_email: false });
        await tx.raw('ALTER TABLE projects ENABLE TRIGGER projects_notify_projects');
      });
      const unverified = await iss.sign({ email: `user-${p.id}@example.com`, email_verified: false }, { audience: AUDIENCE });
      expect((await signIn(b, p.projectKey, unverified)).status).to.equal(200);
      await until('the cache listening again', () => b.projectCache?.active && b.projectCache.listenerPid !== pid, 10_000);
      expect((await warm(b, p.projectKey, jwt)).id).to.equal(p.id);
    });

    it('PROJECT_CACHE_TTL_MS=0 runs without a cache', async () => {
      const off = await startApp({ OIDC_CA_FILE: path.join(withIdp.dir, 'ca.pem'), PROJECT_CACHE_TTL_MS: '0' });
      try {
        expect(off.projectCache).to.equal(undefined);
        const { project: p, jwt } = await setup();
        expect((await signIn(off, p.projectKey, jwt)).status).to.equal(200);
        expect((await a.client.delete(`/api/v1/project/${p.id}`)).status).to.equal(204);
        expect((await signIn(off, p.projectKey, jwt)).status).to.equal(400);
      } finally {
        await off.close();
      }
    });
  });
});
