import { expect } from 'chai';
import { startAppWithIdp, type TestApp } from '../../support/app.js';
import { createOrganisation, createProject } from '../../support/factories.js';
import type { TestIdp } from '../../support/idp.js';

const AUDIENCE = 'urn:custody:testnet';

/**
 * Sign-in and wallet creation verify the user's JWT before anything of it reaches the database: a
 * forged token answers 401 whatever its claims, claims a database cannot hold included (a NUL in
 * the e-mail, which PostgreSQL refuses in any text parameter).
 */
describe('wallets: the JWT is verified before any of its claims reaches the database', function () {
  this.timeout(60_000);
  let idp: TestIdp;
  let app: TestApp;
  let close: () => Promise<void>;

  before(async () => {
    ({ app, idp, close } = await startAppWithIdp({ JWKS_REFETCH_INTERVAL_MS: '0' }));
  });
  after(() => close());

  it('answers 401 to forged tokens whatever their claims, on every user endpoint', async () => {
    const iss = await idp.issuer();
    const org = await createOrganisation(app.client);
    const project = await createProject(app.client, org.id, { issuer: iss.issuer });
    const good = await iss.sign({ email: 'real@example.com' }, { audience: AUDIENCE });
    const tamper = (jwt: string, claims: Record<string, unknown>) => {
      const [h, p, s] = jwt.split('.');
      const payload = { ...(JSON.parse(Buffer.from(p ?? '', 'base64url').toString('utf8')) as Record<string, unknown>), ...claims };
      return `${h}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.${s}`;
    };
    const forged = [
      tamper(good, { email: 'nul\u0000@example.com' }),
      tamper(good, { email: `${'x'.repeat(300)}@example.com` }),
      tamper(good, { email: 'real@example.com', email_verified: true, extra: 'x'.repeat(2000) }),
      tamper(good, { email: "'; DROP TABLE wallets; --" }),
    ];
    for (const route of ['/api/v1/signin', '/api/v1/wallets/createasync']) {
      for (const jwt of forged) {
        const res = await app.client.post(route, { key: project.projectKey }, { token: jwt });
        expect(res.status, `${route}: ${res.text}`).to.equal(401);
        expect(res.problem.code).to.equal('invalid_token');
      }
    }
    // The genuine token still signs in, and nothing was made for the forged ones.
    expect((await app.client.post('/api/v1/signin', { key: project.projectKey }, { token: good })).status).to.equal(200);
    expect(await app.db('wallets').where({ project_id: project.id })).to.have.length(1);
  });
});
