import { expect } from 'chai';
import { startApp, type TestApp } from '../../support/app.js';
import { createTenant } from '../../support/factories.js';
import { testDb } from '../../support/db.js';

/** A browser's view of the console's cookie: the session secret's `name=value`, and its attributes. */
interface Cookie {
  pair: string;
  attributes: string[];
}

function sessionCookie(res: Response): Cookie {
  const line = res.headers.getSetCookie().find((c) => /^(__Host-)?custody_session=/.test(c));
  if (!line) throw new Error(`no session cookie in ${JSON.stringify(res.headers.getSetCookie())}`);
  const [pair = '', ...attributes] = line.split(';').map((s) => s.trim());
  return { pair, attributes: attributes.map((a) => a.toLowerCase()) };
}

/** The console's calls as its page makes them: the cookie, and on writes the CSRF token. */
class Browser {
  cookie = '';
  csrf = '';
  constructor(readonly url: string) {}

  async signIn(token: string): Promise<Response> {
    const res = await fetch(`${this.url}/console/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token }),
    });
    if (res.status === 201) {
      this.cookie = sessionCookie(res).pair;
      this.csrf = ((await res.clone().json()) as { csrfToken: string }).csrfToken;
    }
    return res;
  }

  call(method: string, path: string, body?: unknown, opts: { csrf?: string | null } = {}): Promise<Response> {
    const headers: Record<string, string> = { cookie: this.cookie };
    const csrf = opts.csrf === undefined ? this.csrf : opts.csrf;
    if (csrf !== null && method !== 'GET') headers['x-csrf-token'] = csrf;
    if (body !== undefined) headers['content-type'] = 'application/json';
    return fetch(`${this.url}${path}`, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  }
}

describe('console sessions (an API token exchanged for a cookie)', () => {
  let app: TestApp;
  let clock = Date.now();

  before(async () => {
    app = await startApp({ CONSOLE_SESSION_TTL_S: '3600' }, undefined, { now: () => clock });
  });
  after(() => app.close());

  const tokensOf = async (organisationId: number) =>
    Number((await testDb()('api_tokens').where({ organisation_id: organisationId }).count<Array<{ count: string }>>('* as count'))[0]?.count);

  it('serves the console page with a strict CSP and only its built assets', async () => {
    const page = await fetch(`${app.url}/console`);
    expect(page.status).to.equal(200);
    const csp = page.headers.get('content-security-policy') ?? '';
    expect(csp).to.include("script-src 'self'").and.include("default-src 'none'").and.include("frame-ancestors 'none'");
    expect(csp).not.to.include('unsafe-inline');
    const html = await page.text();
    // No inline script: every <script> names a file of the service.
    expect(html.match(/<script[^>]*>/g)).to.deep.equal(['<script type="module" src="/console/assets/app.js">']);
    expect((await fetch(`${app.url}/console/assets/app.js`)).status).to.equal(200);
    expect((await fetch(`${app.url}/console/assets/app.css`)).status).to.equal(200);
    const other = await fetch(`${app.url}/console/assets/..%2F..%2Fpackage.json`);
    expect(other.status).to.equal(404);
  });

  it('refuses a bad sign-in with a problem and makes no session', async () => {
    const before = await testDb()('console_sessions').count<Array<{ count: string }>>('* as count');
    const b = new Browser(app.url);
    const bad = await b.signIn('');
    expect(bad.status).to.equal(400);
    expect(bad.headers.get('content-type')).to.match(/problem\+json/);
    const notJson = await fetch(`${app.url}/console/session`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'token=x' });
    expect(notJson.status).to.equal(400);
    const unknown = await b.signIn('sk_test_unknown_token_value');
    expect(unknown.status).to.equal(401);
    expect(unknown.headers.getSetCookie()).to.deep.equal([]);
    const after = await testDb()('console_sessions').count<Array<{ count: string }>>('* as count');
    expect(after).to.deep.equal(before);
  });

  it('signs in: an HttpOnly, SameSite=Strict cookie (not Secure over plain http), hashes only in the table, an audit row', async () => {
    const t = await createTenant(app.client);
    const b = new Browser(app.url);
    const res = await b.signIn(t.tokens.orgAdmin.token);
    expect(res.status).to.equal(201);
    const cookie = sessionCookie(res);
    expect(cookie.attributes).to.include('httponly').and.include('samesite=strict').and.include('path=/');
    expect(cookie.attributes).not.to.include('secure');
    expect(cookie.attributes.some((a) => a.startsWith('max-age=3600') || a.startsWith('expires='))).to.equal(true);
    const body = (await res.json()) as { principal: { scope: string; role: string; may: string[] }; csrfToken: string };
    expect(body.principal).to.include({ scope: 'organisation', role: 'admin' });
    expect(body.principal.may).to.include('token.create').and.not.include('organisation.create');
    // Neither the token nor the cookie's secret is stored.
    const secret = Buffer.from(b.cookie.split('=')[1] ?? '', 'base64url');
    const rows = await testDb()('console_sessions').select('session_hash', 'token_hash');
    for (const r of rows as Array<{ session_hash: Buffer; token_hash: Buffer }>) {
      expect(r.session_hash.equals(secret)).to.equal(false);
      expect(r.token_hash.toString('utf8')).not.to.include(t.tokens.orgAdmin.token);
    }
    const audit = await testDb()('audit_log').where({ organisation_id: t.org.id, action: 'console.signed_in' }).select('actor');
    expect(audit).to.deep.equal([{ actor: `token:${t.tokens.orgAdmin.id}` }]);
  });

  it('sets Secure when the service is reached over https (PUBLIC_BASE_URL)', async () => {
    const secure = await startApp({ PUBLIC_BASE_URL: 'https://custody.example.com' });
    try {
      const t = await createTenant(secure.client);
      const res = await new Browser(secure.url).signIn(t.tokens.orgRead.token);
      expect(res.status).to.equal(201);
      // __Host-: only this host sets it (no Domain, Path=/, Secure), so a sibling subdomain cannot plant one.
      const cookie = sessionCookie(res);
      expect(cookie.pair).to.match(/^__Host-custody_session=/);
      expect(cookie.attributes).to.include('secure').and.include('path=/');
      expect(cookie.attributes.some((a) => a.startsWith('domain='))).to.equal(false);
    } finally {
      await secure.close();
    }
  });

  it('acts as the token: reads with the cookie, writes only with the CSRF token, and a write refused changes nothing', async () => {
    const t = await createTenant(app.client);
    const b = new Browser(app.url);
    expect((await b.signIn(t.tokens.orgAdmin.token)).status).to.equal(201);
    const list = await b.call('GET', `/api/v1/organisations/${t.org.id}/tokens`);
    expect(list.status).to.equal(200);
    const count = await tokensOf(t.org.id);
    for (const csrf of [null, '', 'x'.repeat(43), b.csrf.slice(1)]) {
      const refused = await b.call('POST', `/api/v1/organisations/${t.org.id}/tokens`, { name: 'forged', role: 'admin' }, { csrf });
      expect(refused.status, `CSRF ${String(csrf)}`).to.equal(403);
      expect(((await refused.json()) as { detail: string }).detail).to.match(/CSRF/);
    }
    expect(await tokensOf(t.org.id)).to.equal(count);
    const made = await b.call('POST', `/api/v1/organisations/${t.org.id}/tokens`, { name: 'console', role: 'read' });
    expect(made.status).to.equal(201);
    expect(await tokensOf(t.org.id)).to.equal(count + 1);
    // The audit row names the token the session stands for.
    const id = ((await made.json()) as { id: number }).id;
    const row = await testDb()('audit_log')
      .where({ organisation_id: t.org.id, target: String(id) })
      .first('actor', 'action');
    expect(row).to.deep.equal({ actor: `token:${t.tokens.orgAdmin.id}`, action: 'POST /api/v1/organisations/:id/tokens' });
    // Another organisation is out of its reach, as for the bearer.
    const other = await createTenant(app.client);
    expect((await b.call('GET', `/api/v1/organisations/${other.org.id}/tokens`)).status).to.equal(404);
  });

  it('a read token’s session may read, and a forced write is refused', async () => {
    const t = await createTenant(app.client);
    const b = new Browser(app.url);
    const res = await b.signIn(t.tokens.orgRead.token);
    const { principal } = (await res.json()) as { principal: { may: string[] } };
    expect(principal.may.filter((a) => /create|change|write|revoke|delete|rename|retry|rotate/i.test(a))).to.deep.equal([]);
    const count = await tokensOf(t.org.id);
    const forced = await b.call('POST', `/api/v1/organisations/${t.org.id}/tokens`, { name: 'forced', role: 'admin' });
    expect(forced.status).to.equal(403);
    expect(await tokensOf(t.org.id)).to.equal(count);
  });

  it('survives a reload (GET /console/session), and ends on sign-out: the cookie is cleared and refused after', async () => {
    const t = await createTenant(app.client);
    const b = new Browser(app.url);
    await b.signIn(t.tokens.orgAdmin.token);
    const again = await b.call('GET', '/console/session');
    expect(again.status).to.equal(200);
    expect(((await again.json()) as { csrfToken: string }).csrfToken).to.equal(b.csrf);
    expect((await b.call('DELETE', '/console/session', undefined, { csrf: null })).status).to.equal(403);
    const out = await b.call('DELETE', '/console/session');
    expect(out.status).to.equal(204);
    expect(sessionCookie(out).pair).to.equal('custody_session=');
    expect((await b.call('GET', '/console/session')).status).to.equal(401);
    expect((await b.call('GET', `/api/v1/organisations/${t.org.id}/tokens`)).status).to.equal(401);
    const audit = await testDb()('audit_log').where({ organisation_id: t.org.id, action: 'console.signed_out' }).count<Array<{ count: string }>>('* as count');
    expect(Number(audit[0]?.count)).to.equal(1);
  });

  it('ends when its token is revoked, and when it expires (injected clock)', async () => {
    const t = await createTenant(app.client);
    const revoked = new Browser(app.url);
    await revoked.signIn(t.tokens.orgRead.token);
    expect((await revoked.call('GET', `/api/v1/organisations/${t.org.id}/tokens`)).status).to.equal(200);
    expect((await t.orgAdmin.delete(`/api/v1/organisations/${t.org.id}/tokens/${t.tokens.orgRead.id}`)).status).to.equal(204);
    expect((await revoked.call('GET', `/api/v1/organisations/${t.org.id}/tokens`)).status).to.equal(401);
    expect((await revoked.call('GET', '/console/session')).status).to.equal(401);

    const expiring = new Browser(app.url);
    await expiring.signIn(t.tokens.orgAdmin.token);
    clock += 3599_000;
    expect((await expiring.call('GET', `/api/v1/organisations/${t.org.id}/tokens`)).status).to.equal(200);
    clock += 2_000;
    expect((await expiring.call('GET', `/api/v1/organisations/${t.org.id}/tokens`)).status).to.equal(401);
  });

  it('signing in again ends the session the browser held; a cookie-authenticated answer is not stored by caches', async () => {
    const t = await createTenant(app.client);
    const b = new Browser(app.url);
    await b.signIn(t.tokens.orgRead.token);
    const old = b.cookie;
    const read = await b.call('GET', `/api/v1/organisations/${t.org.id}/tokens`);
    expect(read.headers.get('cache-control')).to.equal('no-store');
    await fetch(`${app.url}/console/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie: old },
      body: JSON.stringify({ token: t.tokens.orgAdmin.token }),
    });
    const stale = await fetch(`${app.url}/api/v1/organisations/${t.org.id}/tokens`, { headers: { cookie: old } });
    expect(stale.status).to.equal(401);
  });

  it('a sign-in counts against its token’s rate limit, and an unknown cookie against the address’s failed authentications', async () => {
    const limited = await startApp({ RATE_LIMIT_TOKEN: '3', RATE_LIMIT_AUTH_FAILURES: '3', RATE_LIMIT_WINDOW_S: '60' });
    try {
      const t = await createTenant(limited.client);
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) statuses.push((await new Browser(limited.url).signIn(t.tokens.orgRead.token)).status);
      expect(statuses.slice(0, 3)).to.deep.equal([201, 201, 201]);
      expect(statuses.slice(3)).to.deep.equal([429, 429]);
      const unknown: number[] = [];
      for (let i = 0; i < 5; i++)
        unknown.push((await fetch(`${limited.url}/console/session`, { headers: { cookie: `custody_session=${'A'.repeat(43)}` } })).status);
      expect(unknown.slice(0, 3)).to.deep.equal([401, 401, 401]);
      expect(unknown.slice(3)).to.deep.equal([429, 429]);
    } finally {
      await limited.close();
    }
  });

  it('the bearer header wins over a cookie, and the operator token signs in too', async () => {
    const t = await createTenant(app.client);
    const b = new Browser(app.url);
    await b.signIn(t.tokens.orgRead.token);
    const res = await fetch(`${app.url}/api/v1/organisations/${t.org.id}/tokens`, {
      method: 'POST',
      headers: { cookie: b.cookie, authorization: `Bearer ${t.tokens.orgAdmin.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'by bearer', role: 'read' }),
    });
    expect(res.status).to.equal(201);
    const op = new Browser(app.url);
    const signed = await op.signIn(app.operatorToken);
    expect(signed.status).to.equal(201);
    expect(((await signed.json()) as { principal: { scope: string; may: string[] } }).principal).to.deep.include({ scope: 'operator' });
    expect((await op.call('GET', '/api/v1/organisations')).status).to.equal(200);
  });

  it('is not served with CONSOLE_ENABLED=false, and a cookie is then no credential', async () => {
    const t = await createTenant(app.client);
    const b = new Browser(app.url);
    await b.signIn(t.tokens.orgAdmin.token);
    const off = await startApp({ CONSOLE_ENABLED: 'false' });
    try {
      expect((await fetch(`${off.url}/console`)).status).to.equal(404);
      expect(
        (await fetch(`${off.url}/console/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"token":"x"}' })).status,
      ).to.equal(404);
      const withCookie = await fetch(`${off.url}/api/v1/organisations/${t.org.id}/tokens`, { headers: { cookie: b.cookie } });
      expect(withCookie.status).to.equal(401);
    } finally {
      await off.close();
    }
  });
});
