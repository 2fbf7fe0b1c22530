import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { decodeProtectedHeader } from 'jose';
import { startApp, type TestApp } from '../../support/app.js';
import { createOrganisation } from '../../support/factories.js';
import { createCa } from '../../support/idp.js';
import { toolPath } from '../../support/tools.js';
import { freePort, until } from '../../support/wait.js';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/**
 * ORY Hydra, a real OpenID provider built from the Go module proxy (scripts/hydra.sh): its
 * discovery, key set, an authorization-code flow's ID token (audience: the client id, so the
 * project names its own audience) and a key rotation, as a customer's provider would serve them.
 */
describe('a second real OpenID provider: ORY Hydra', function () {
  this.timeout(180_000);
  let dir: string;
  let hydra: ChildProcess;
  let app: TestApp;
  let ca: string;
  let publicUrl: string;
  let adminUrl: string;
  const cookies = new Map<string, string>();

  /** One HTTP(S) request; cookies the public side sets are kept and sent back, as a browser would. */
  function call(url: string, options: { method?: string; json?: unknown; form?: Record<string, string> } = {}): Promise<Answer> {
    const u = new URL(url);
    const body = options.json !== undefined ? JSON.stringify(options.json) : options.form ? new URLSearchParams(options.form).toString() : undefined;
    const headers: Record<string, string> = {
      ...(options.json !== undefined ? { 'content-type': 'application/json' } : options.form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      ...(cookies.size > 0 ? { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; ') } : {}),
    };
    const send = u.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise((resolve, reject) => {
      const req = send(u, { method: options.method ?? (body ? 'POST' : 'GET'), headers, ...(u.protocol === 'https:' ? { ca } : {}) }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          for (const c of res.headers['set-cookie'] ?? []) {
            const [pair = ''] = c.split(';');
            const at = pair.indexOf('=');
            cookies.set(pair.slice(0, at), pair.slice(at + 1));
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text });
        });
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  /** The authorization-code flow, with the login and consent of `email` accepted through the admin API. */
  async function idToken(clientId: string, email: string): Promise<string> {
    cookies.clear();
    const redirectUri = 'http://127.0.0.1:9/callback';
    const start = `${publicUrl}/oauth2/auth?${new URLSearchParams({ client_id: clientId, response_type: 'code', scope: 'openid email', redirect_uri: redirectUri, state: 'state-of-the-flow', nonce: 'nonce-of-the-flow' }).toString()}`;
    const toLogin = await call(start);
    const loginChallenge = new URL(String(toLogin.headers['location'])).searchParams.get('login_challenge') ?? '';
    expect(loginChallenge, toLogin.body).not.to.equal('');
    const login = await call(`${adminUrl}/admin/oauth2/auth/requests/login/accept?login_challenge=${loginChallenge}`, {
      method: 'PUT',
      json: { subject: email },
    });
    const toConsent = await call(JSON.parse(login.body).redirect_to);
    const consentChallenge = new URL(String(toConsent.headers['location'])).searchParams.get('consent_challenge') ?? '';
    expect(consentChallenge, toConsent.body).not.to.equal('');
    const consent = await call(`${adminUrl}/admin/oauth2/auth/requests/consent/accept?consent_challenge=${consentChallenge}`, {
      method: 'PUT',
      json: { grant_scope: ['openid', 'email'], session: { id_token: { email, email_verified: true } } },
    });
    const toCallback = await call(JSON.parse(consent.body).redirect_to);
    const code = new URL(String(toCallback.headers['location'])).searchParams.get('code') ?? '';
    expect(code, toCallback.body).not.to.equal('');
    const tokens = await call(`${publicUrl}/oauth2/token`, {
      form: { grant_type: 'authorization_code', code, redirect_uri: redirectUri, client_id: clientId, client_secret: 'a-client-secret-of-the-test' },
    });
    expect(tokens.status, tokens.body).to.equal(200);
    return JSON.parse(tokens.body).id_token as string;
  }

  before(async () => {
    const bin = toolPath('hydra');
    dir = mkdtempSync(path.join(tmpdir(), 'custody-hydra-'));
    const authority = await createCa('custody hydra test');
    ca = authority.certPem;
    const { certPem, keyPem } = await authority.issue();
    writeFileSync(path.join(dir, 'tls.crt'), certPem);
    writeFileSync(path.join(dir, 'tls.key'), keyPem);
    writeFileSync(path.join(dir, 'ca.pem'), ca);
    const [pub, admin] = [await freePort(), await freePort()];
    publicUrl = `https://127.0.0.1:${pub}`;
    adminUrl = `http://127.0.0.1:${admin}`;
    writeFileSync(
      path.join(dir, 'hydra.yaml'),
      [
        'dsn: memory',
        'log: { level: error }',
        'serve:',
        `  public: { host: 127.0.0.1, port: ${pub} }`,
        `  admin: { host: 127.0.0.1, port: ${admin}, tls: { enabled: false } }`,
        `  tls: { enabled: true, cert: { path: ${path.join(dir, 'tls.crt')} }, key: { path: ${path.join(dir, 'tls.key')} } }`,
        'urls:',
        `  self: { issuer: ${publicUrl}/ }`,
        '  login: http://127.0.0.1:9/login',
        '  consent: http://127.0.0.1:9/consent',
        'secrets: { system: [this-is-the-system-secret-of-the-hydra-test] }',
        '',
      ].join('\n'),
    );
    hydra = spawn(bin, ['serve', 'all', '--config', path.join(dir, 'hydra.yaml')], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    hydra.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    await until(
      'Hydra to be ready',
      async () => {
        if (hydra.exitCode !== null) throw new Error(`hydra exited ${hydra.exitCode}: ${stderr.slice(-2000)}`);
        return (await call(`${adminUrl}/health/ready`).catch(() => undefined))?.status === 200;
      },
      60_000,
    );
    app = await startApp({ OIDC_CA_FILE: path.join(dir, 'ca.pem'), JWKS_REFETCH_INTERVAL_MS: '0' });
  });
  after(async () => {
    await app?.close();
    hydra?.kill('SIGTERM');
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("signs a user in with Hydra's ID token (the project's audience is the client id), and again after Hydra rotates its signing key", async () => {
    const discovery = JSON.parse((await call(`${publicUrl}/.well-known/openid-configuration`)).body) as { issuer: string; jwks_uri: string };
    const created = await call(`${adminUrl}/admin/clients`, {
      json: {
        client_secret: 'a-client-secret-of-the-test',
        grant_types: ['authorization_code'],
        response_types: ['code'],
        scope: 'openid email',
        redirect_uris: ['http://127.0.0.1:9/callback'],
        token_endpoint_auth_method: 'client_secret_post',
      },
    });
    expect(created.status, created.body).to.equal(201);
    const clientId = JSON.parse(created.body).client_id as string;

    const org = await createOrganisation(app.client);
    const project = await app.client.post(`/api/v1/organisations/${org.id}/projects`, { name: 'Hydra app', issuer: discovery.issuer, audience: clientId });
    expect(project.status, project.text).to.equal(201);
    const signIn = (jwt: string) => app.client.post('/api/v1/signin', { key: project.body.projectKey }, { token: jwt });

    const first = await idToken(clientId, 'ada@example.com');
    const res = await signIn(first);
    expect(res.status, res.text).to.equal(200);
    expect(res.body.isNew).to.equal(true);
    const check = await app.client.post(`/api/v1/project/${project.body.id}/issuer/check`, { token: first });
    expect(check.body.ok, check.text).to.equal(true);

    // A new signing key: Hydra signs with it from now on; the service fetches it on first sight.
    const rotated = await call(`${adminUrl}/admin/keys/hydra.openid.id-token`, { json: { alg: 'RS256', use: 'sig', kid: 'rotated-by-the-test' } });
    expect(rotated.status, rotated.body).to.equal(201);
    const second = await idToken(clientId, 'ada@example.com');
    expect(decodeProtectedHeader(second).kid).to.equal('rotated-by-the-test');
    expect(decodeProtectedHeader(second).kid).not.to.equal(decodeProtectedHeader(first).kid);
    const again = await signIn(second);
    expect(again.status, again.text).to.equal(200);
    expect(again.body).to.include({ isNew: false, walletAddress: res.body.walletAddress });
  });
});
