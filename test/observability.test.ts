import { expect } from 'chai';
import { WarnOncePer } from '../src/platform/logging/once.js';
import { createLogger } from '../src/platform/logging/logger.js';
import { Writable } from 'node:stream';
import { createProject, createTenant } from './support/factories.js';
import { freePort, until } from './support/wait.js';
import { startApp, startAppWithIdp } from './support/app.js';
import { startSigner } from './support/signer.js';
import { TestIssuer } from './support/idp.js';
import { startDevVault } from './support/vault.js';
import { testDatabaseUrl } from './support/db.js';
import { createDb } from '../src/platform/db/knex.js';
import { migrateLatest } from '../src/platform/db/migrate.js';
import { scratchDatabase } from './support/process.js';
import { tenantActive } from '../src/access/tenancy/quiet.js';

const AUDIENCE = 'urn:custody:testnet';
const warnings = (logs: string[], msg: RegExp) =>
  logs.map((l) => JSON.parse(l) as { level: number; msg: string } & Record<string, unknown>).filter((l) => l.level === 40 && msg.test(l.msg));

describe('operators can see why: IdP and delivery failures are logged once per cause and target', function () {
  this.timeout(60_000);

  it('WarnOncePer logs a cause once per interval and says how many were held back', () => {
    const lines: string[] = [];
    const sink = new Writable({ write: (c: Buffer, _e, done) => (lines.push(c.toString()), done()) });
    let now = 0;
    const once = new WarnOncePer(createLogger('info', sink), 60_000, 2, () => now);
    for (let i = 0; i < 100; i++) once.warn('a', { target: 'x' }, 'failed');
    once.warn('b', {}, 'other cause');
    expect(lines).to.have.length(2);
    now = 60_000;
    once.warn('a', { target: 'x' }, 'failed');
    expect(JSON.parse(lines[2] ?? '{}')).to.include({ heldBack: 99 });
  });

  it('an unreachable or misbehaving identity provider: one warning per issuer and cause, with the reason and no token', async () => {
    const env = await startAppWithIdp({ JWKS_CACHE_TTL_S: '1' });
    try {
      const { app, idp } = env;
      const iss = await idp.issuer();
      const t = await createTenant(app.client);
      const project = await createProject(app.client, t.org.id, { issuer: iss.issuer });
      iss.status = 503;
      const tokens: string[] = [];
      for (let i = 0; i < 5; i++) {
        const jwt = await iss.sign({ email: `u${i}@example.com` }, { audience: AUDIENCE });
        tokens.push(jwt);
        const res = await app.client.post('/api/v1/signin', { key: project.projectKey }, { token: jwt });
        expect(res.status).to.equal(401);
      }
      const lines = warnings(app.logs, /^identity provider failed/);
      expect(lines, JSON.stringify(lines)).to.have.length(1);
      expect(lines[0]).to.include({ issuer: iss.issuer });
      expect(String(lines[0]?.['reason'])).to.match(/discovery document: answered HTTP 503/);
      // Another cause of the same issuer is its own line.
      iss.status = undefined;
      iss.discovery = { issuer: 'https://someone-else.example.com', jwks_uri: `${iss.issuer}/.well-known/jwks.json` };
      await app.client.post('/api/v1/signin', { key: project.projectKey }, { token: tokens[0] ?? '' });
      expect(warnings(app.logs, /^identity provider failed/)).to.have.length(2);
      for (const jwt of tokens) expect(app.logs.join('\n')).not.to.include(jwt.split('.')[2] ?? jwt);
    } finally {
      await env.close();
    }
  });

  it('failed webhook deliveries: one warning per receiver and cause, with the origin only (no path, query or payload)', async () => {
    const env = await startAppWithIdp({ WEBHOOK_RETRY_SCHEDULE: '0,50,50,50', RELAY_POLL_MS: '50' });
    try {
      const { app, receiver } = env;
      receiver.status = 500;
      const t = await createTenant(app.client);
      const hook = await t.projectAdmin.post(`/api/v1/project/${t.project.id}/webhooks`, {
        url: `${receiver.url}/secret-path?token=do-not-log`,
        events: ['*'],
      });
      expect(hook.status, hook.text).to.equal(201);
      for (let i = 0; i < 3; i++) {
        const issued = await t.projectAdmin.post('/api/v1/membership/issue', [
          { membershipType: 'gym:gold', walletAddress: `0x${String(i + 1).padStart(40, '0')}` },
        ]);
        expect(issued.status).to.equal(201);
      }
      await until('attempts and retries', () => Promise.resolve(receiver.received.length >= 6));
      // This app's relay also retries what earlier suites left in the shared database: count this project's.
      const lines = warnings(app.logs, /^webhook delivery failed/).filter((l) => l['projectId'] === t.project.id);
      expect(lines, JSON.stringify(lines)).to.have.length(1);
      expect(lines[0]).to.include({ target: new URL(receiver.url).origin, kind: 'http_status', status: 500 });
      const all = app.logs.join('\n');
      expect(all).not.to.include('do-not-log');
      expect(all).not.to.include('secret-path');
    } finally {
      await env.close();
    }
  });
});

/** `GET /metrics` of an app, as text. */
async function scrape(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).to.equal(200);
  return res.text();
}

/** The value of the sample of `name` whose labels include `labels`; undefined when there is none. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const has = Object.fromEntries([...(m[2] ?? '').matchAll(/([a-zA-Z_]+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, v]) => has[k] === v)) return Number(m[3]);
  }
  return undefined;
}

describe('metrics for the conditions operators are alerted on (helm/custody/files/alerts.yaml)', function () {
  this.timeout(120_000);

  it('identity providers: each discovery and key set fetch counted by outcome (ok, http_status, unreachable, invalid)', async () => {
    const env = await startAppWithIdp();
    try {
      const { app, idp } = env;
      const count = async (document: string, outcome: string) => sample(await scrape(app.url), 'custody_idp_fetches_total', { document, outcome }) ?? 0;
      const signIn = async (iss: TestIssuer, expected: number) => {
        const t = await createTenant(app.client);
        const project = await createProject(app.client, t.org.id, { issuer: iss.issuer });
        const jwt = await iss.sign({ email: 'u@example.com' }, { audience: AUDIENCE });
        const res = await app.client.post('/api/v1/signin', { key: project.projectKey }, { token: jwt });
        expect(res.status, res.text).to.equal(expected);
      };
      const before = {
        discoveryOk: await count('discovery', 'ok'),
        jwksOk: await count('jwks', 'ok'),
        status: await count('discovery', 'http_status'),
        invalid: await count('discovery', 'invalid'),
        unreachable: await count('discovery', 'unreachable'),
      };
      await signIn(await idp.issuer(), 200);
      expect(await count('discovery', 'ok')).to.equal(before.discoveryOk + 1);
      expect(await count('jwks', 'ok')).to.equal(before.jwksOk + 1);

      const down = await idp.issuer();
      down.status = 503;
      await signIn(down, 401);
      expect(await count('discovery', 'http_status')).to.equal(before.status + 1);

      const wrong = await idp.issuer();
      wrong.discovery = { issuer: 'https://someone-else.example.com', jwks_uri: `${wrong.issuer}/.well-known/jwks.json` };
      await signIn(wrong, 401);
      expect(await count('discovery', 'invalid')).to.equal(before.invalid + 1);

      // An issuer on a port nothing listens on: refused.
      const gone = new TestIssuer(`https://127.0.0.1:${await freePort()}/gone`);
      await gone.addKey();
      await signIn(gone, 401);
      expect(await count('discovery', 'unreachable')).to.equal(before.unreachable + 1);
    } finally {
      await env.close();
    }
  });

  it('a failing receiver: the age of its oldest retrying delivery, while the outbox is not stuck; a stopped relay: the oldest due row ages until it runs again', async () => {
    // Its own database: a delivery an earlier suite's relay had claimed when its app closed stays due, and locked, until its lease ends.
    const scratch = await scratchDatabase();
    const own = createDb({ url: scratch.url, poolMax: 10 });
    await migrateLatest(own);
    // One retry a minute later: the failed delivery stays pending, not due.
    const env = await startAppWithIdp({ WEBHOOK_RETRY_SCHEDULE: '0,60000', RELAY_POLL_MS: '50' }, own);
    try {
      const { app, receiver } = env;
      receiver.status = 500;
      const t = await createTenant(app.client);
      const hook = await t.projectAdmin.post(`/api/v1/project/${t.project.id}/webhooks`, { url: `${receiver.url}/hook`, events: ['*'] });
      expect(hook.status, hook.text).to.equal(201);
      const issue = async () => {
        const issued = await t.projectAdmin.post('/api/v1/membership/issue', [
          { membershipType: 'gym:gold', walletAddress: `0x${String(Math.floor(Math.random() * 1e9)).padStart(40, '0')}` },
        ]);
        expect(issued.status, issued.text).to.equal(201);
      };
      await issue();
      await until('a failed attempt', () => Promise.resolve(receiver.received.length >= 1));
      await new Promise((r) => setTimeout(r, 1_100));
      let text = '';
      await until('the retrying delivery on /metrics', async () => {
        text = await scrape(app.url);
        return (sample(text, 'custody_webhook_oldest_failing_delivery_age_seconds', { kind: 'subscription' }) ?? 0) >= 1;
      });
      // What the database holds (earlier suites' deliveries may be older than ours), read right after the scrape.
      const failing = sample(text, 'custody_webhook_oldest_failing_delivery_age_seconds', { kind: 'subscription' }) ?? -1;
      const { rows } = await app.db.raw<{ rows: Array<{ age: number }> }>(
        `SELECT extract(epoch FROM now() - min(created_at))::float8 AS age FROM outbox
          WHERE kind = 'delivery' AND delivery_kind = 'subscription' AND status = 'pending' AND attempts > 0 AND ${tenantActive('outbox.project_id')}`,
      );
      expect(failing).to.be.within((rows[0]?.age ?? 0) - 2, rows[0]?.age ?? 0);
      expect(failing).to.be.at.least(1);
      // Its next attempt is a minute away: nothing due waits, the outbox is not stuck.
      expect(sample(text, 'custody_outbox_oldest_due_age_seconds', { kind: 'delivery' })).to.be.within(0, 1);
      expect(sample(text, 'custody_outbox_depth', { kind: 'delivery', status: 'pending' })).to.be.at.least(1);

      // The relay stopped: a recorded event waits to be fanned out, and its wait shows.
      await app.quiet(async () => {
        await issue();
        await new Promise((r) => setTimeout(r, 2_100));
        const stuck = sample(await scrape(app.url), 'custody_outbox_oldest_due_age_seconds', { kind: 'event' }) ?? -1;
        expect(stuck).to.be.within(2, 30);
      });
      await until('the relay takes it again', async () => (sample(await scrape(app.url), 'custody_outbox_oldest_due_age_seconds', { kind: 'event' }) ?? 0) < 1);
    } finally {
      await env.close();
      await own.destroy();
      await scratch.drop();
    }
  });

  it("the signer's health: up with its key store while it answers, both down once it is stopped", async () => {
    const signer = await startSigner();
    const app = await startApp({ KEYVAULT_URL: signer.url, KEYVAULT_TOKEN: signer.token });
    try {
      const up = await scrape(app.url);
      expect(sample(up, 'custody_signer_up')).to.equal(1);
      expect(sample(up, 'custody_signer_key_store_up')).to.equal(1);
      // The local store has no Vault credential to expire.
      expect(sample(up, 'custody_signer_vault_credential_expiry_timestamp_seconds')).to.equal(undefined);
      await signer.stop();
      const down = await scrape(app.url);
      expect(sample(down, 'custody_signer_up')).to.equal(0);
      expect(sample(down, 'custody_signer_key_store_up')).to.equal(0);
    } finally {
      await app.close();
      await signer.destroy();
    }
  });

  it("a sealed Vault (real dev server, AppRole): the signer up and its key store down until unsealed; the secret id's expiry", async function () {
    this.timeout(300_000);
    const vault = await startDevVault();
    const signer = await startSigner({ VAULT_ADDR: vault.addr, ...vault.setup() });
    const app = await startApp({ KEYVAULT_URL: signer.url, KEYVAULT_TOKEN: signer.token });
    try {
      const up = await scrape(app.url);
      expect(sample(up, 'custody_signer_up')).to.equal(1);
      expect(sample(up, 'custody_signer_key_store_up')).to.equal(1);
      // scripts/vault-setup.sh gives secret ids 720 h.
      expect(sample(up, 'custody_signer_vault_credential_expiry_timestamp_seconds')).to.be.closeTo(Date.now() / 1000 + 720 * 3600, 300);
      vault.seal();
      const sealed = await scrape(app.url);
      expect(sample(sealed, 'custody_signer_up')).to.equal(1);
      expect(sample(sealed, 'custody_signer_key_store_up')).to.equal(0);
      vault.unseal();
      await until('the key store back', async () => sample(await scrape(app.url), 'custody_signer_key_store_up') === 1);
    } finally {
      await app.close();
      await signer.destroy();
      await vault.stop();
    }
  });

  it('the database pool: in use, its limit and waiting queries; with every connection taken the scrape still answers and shows it', async () => {
    const db = createDb({ url: testDatabaseUrl(), poolMax: 3 });
    const app = await startApp({}, db);
    type Pooled = { acquireConnection(): Promise<unknown>; releaseConnection(c: unknown): Promise<void> };
    const pool = db.client as Pooled;
    const held: unknown[] = [];
    try {
      // Just started, the app's own background work may be waiting for the pool's first connections.
      const idle = await until('nothing waits for a connection', async () => {
        const text = await scrape(app.url);
        return sample(text, 'custody_db_pool_acquires_pending') === 0 ? text : undefined;
      });
      expect(sample(idle, 'custody_db_pool_connections_max')).to.equal(3);
      expect(sample(idle, 'custody_db_pool_connections_in_use')).to.be.within(0, 3);
      expect(sample(idle, 'custody_db_pool_share_waits_pending')).to.equal(0);
      expect((sample(idle, 'custody_db_pool_connections_in_use') ?? 9) + (sample(idle, 'custody_db_pool_connections_idle') ?? 9)).to.be.within(0, 3);
      for (let i = 0; i < 3; i++) held.push(await pool.acquireConnection());
      const waiting = db.raw('SELECT 1').then(() => undefined);
      const at = Date.now();
      const full = await scrape(app.url);
      expect(Date.now() - at, 'the scrape waits for no connection longer than its read timeout').to.be.below(5_000);
      expect(sample(full, 'custody_db_pool_connections_in_use')).to.equal(3);
      expect(sample(full, 'custody_db_pool_acquires_pending')).to.be.at.least(1);
      expect(sample(full, 'custody_db_pool_connections_idle')).to.equal(0);
      for (const c of held.splice(0)) await pool.releaseConnection(c);
      await waiting;
      await until('the pool drains', async () => sample(await scrape(app.url), 'custody_db_pool_acquires_pending') === 0);
    } finally {
      for (const c of held) await pool.releaseConnection(c);
      await app.close();
      await db.destroy();
    }
  });
});
