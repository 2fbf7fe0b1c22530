import { expect } from 'chai';
import { decodeJwt } from 'jose';
import { DEV_ISSUER } from '../../../src/access/auth/dev-idp.js';
import { loadConfig } from '../../../src/platform/config/config.js';
import { startApp, type TestApp } from '../../support/app.js';
import { createOrganisation, createProject, createToken } from '../../support/factories.js';
import { Client } from '../../support/http.js';

describe('the development identity provider (testnet)', () => {
  let app: TestApp;
  let other: TestApp;
  before(async () => {
    [app, other] = await Promise.all([startApp(), startApp()]);
  });
  after(async () => {
    await Promise.all([app.close(), other.close()]);
  });

  async function devProject(body: Record<string, unknown> = {}) {
    const org = await createOrganisation(app.client);
    const project = await createProject(app.client, org.id, { issuer: DEV_ISSUER, ...body });
    const admin = app.client.withToken((await createToken(app.client, org.id, 'admin', project.id)).token);
    const read = app.client.withToken((await createToken(app.client, org.id, 'read', project.id)).token);
    return { org, project, admin, read, path: `/api/v1/project/${project.id}/dev/token` as const };
  }

  it('mints a token for a project that trusts it, which signs the user in at any API process of the deployment', async () => {
    const t = await devProject({ tokenClaim: { name: 'azp', value: 'first-app' } });
    const res = await t.admin.post(t.path, { email: 'Ada@Example.com' });
    expect(res.status, res.text).to.equal(200);
    expect(res.body).to.include({ issuer: DEV_ISSUER, audience: 'urn:custody:testnet' });
    const claims = decodeJwt(res.body.token);
    expect(claims).to.include({ iss: DEV_ISSUER, aud: 'urn:custody:testnet', email: 'Ada@Example.com', email_verified: true });
    expect((claims.exp ?? 0) - (claims.iat ?? 0)).to.equal(3600);

    // Another process of the same deployment verifies it with the same key.
    const signIn = await new Client(other.url, null).post(
      '/api/v1/signin',
      { key: t.project.projectKey },
      { headers: { authorization: `Bearer ${res.body.token}` } },
    );
    expect(signIn.status, signIn.text).to.equal(200);
    expect(signIn.body.isNew).to.equal(true);
    const again = await new Client(app.url, null).post(
      '/api/v1/signin',
      { key: t.project.projectKey },
      { headers: { authorization: `Bearer ${res.body.token}` } },
    );
    expect(again.body).to.include({ isNew: false, walletAddress: signIn.body.walletAddress });

    // The issuer check reports the local key set.
    const check = await t.read.post(`/api/v1/project/${t.project.id}/issuer/check`, { token: res.body.token });
    expect(check.body.ok, check.text).to.equal(true);
    expect(check.body.checks.find((c: { name: string }) => c.name === 'discovery')).to.include({ outcome: 'passed' });
  });

  it("carries the project's required claim, refuses a project that trusts another issuer (409) and read tokens (403)", async () => {
    const t = await devProject({ tokenClaim: { name: 'azp', value: 'shop-frontend' } });
    const res = await t.admin.post(t.path, { email: 'bob@example.com', emailVerified: false, ttlSeconds: 600 });
    expect(res.status, res.text).to.equal(200);
    expect(decodeJwt(res.body.token)).to.include({ azp: 'shop-frontend', email_verified: false });
    expect((await t.read.post(t.path, { email: 'bob@example.com' })).status).to.equal(403);
    expect((await t.admin.post(t.path, { email: 'not an address' })).status).to.equal(400);

    const org = await createOrganisation(app.client);
    const elsewhere = await createProject(app.client, org.id);
    const refused = await app.client.post(`/api/v1/project/${elsewhere.id}/dev/token`, { email: 'bob@example.com' });
    expect(refused.status).to.equal(409);
    expect(refused.problem.code).to.equal('issuer_mismatch');
  });

  it('is not mounted with DEV_IDP=false, and production refuses DEV_IDP at start', async () => {
    const off = await startApp({ DEV_IDP: 'false' });
    try {
      const t = await createOrganisation(off.client);
      const project = await createProject(off.client, t.id, { issuer: DEV_ISSUER, tokenClaim: { name: 'azp', value: 'off-app' } });
      expect((await off.client.post(`/api/v1/project/${project.id}/dev/token`, { email: 'a@example.com' })).status).to.equal(404);
    } finally {
      await off.close();
    }
    expect(() =>
      loadConfig({
        APP_ENV: 'production',
        DEV_IDP: 'true',
        DATABASE_URL: 'postgres://db/custody',
        SERVICE_AUDIENCE: 'urn:custody:prod',
        OPERATOR_TOKEN: 'op_'.padEnd(40, 'x'),
        DATA_ENCRYPTION_KEY: Buffer.alloc(32, 1).toString('base64'),
        KEYVAULT_URL: 'https://keyvault:8443',
      }),
    ).to.throw(/DEV_IDP is refused when APP_ENV=production/);
  });
});
