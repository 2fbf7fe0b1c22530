import { expect } from 'chai';
import { WarnOncePer } from '../src/platform/logging/once.js';
import { createLogger } from '../src/platform/logging/logger.js';
import { Writable } from 'node:stream';
import { startAppWithIdp } from './support/app.js';
import { createProject, createTenant } from './support/factories.js';
import { until } from './support/wait.js';

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
