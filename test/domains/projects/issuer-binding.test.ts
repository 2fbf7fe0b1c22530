import { expect } from 'chai';
import { startAppWithIdp, type TestApp } from '../../support/app.js';
import { createOrganisation, createProject } from '../../support/factories.js';
import type { TestIdp } from '../../support/idp.js';

const AUDIENCE = 'urn:custody:testnet';

/**
 * A user's token works only for the projects that trust it (docs/security.md). The audience is
 * the deployment's, so a token names no project: across organisations an issuer is shared only by
 * projects that each require a claim of their own, and a token without it is refused.
 */
describe('projects: an issuer shared across organisations binds tokens to projects', function () {
  this.timeout(60_000);
  let idp: TestIdp;
  let app: TestApp;
  let close: () => Promise<void>;

  before(async () => {
    ({ app, idp, close } = await startAppWithIdp({ JWKS_REFETCH_INTERVAL_MS: '0' }));
  });
  after(() => close());

  const create = (orgId: number, body: Record<string, unknown>) => app.client.post(`/api/v1/organisations/${orgId}/projects`, { name: 'p', ...body });
  const signin = (jwt: string, key: string) => app.client.post('/api/v1/signin', { key }, { token: jwt });

  it('refuses a second organisation an issuer the first trusts without a claim; projects of one organisation share it freely', async () => {
    const iss = await idp.issuer();
    const a = await createOrganisation(app.client);
    const b = await createOrganisation(app.client);
    await createProject(app.client, a.id, { issuer: iss.issuer });
    // The same organisation: one customer, two projects.
    expect((await create(a.id, { issuer: iss.issuer })).status).to.equal(201);
    for (const body of [{ issuer: iss.issuer }, { issuer: iss.issuer, tokenClaim: { name: 'azp', value: 'b-app' } }]) {
      const res = await create(b.id, body);
      expect(res.status, JSON.stringify(body)).to.equal(409);
      expect(res.problem.code).to.equal('issuer_in_use');
    }
    // Nor by moving an existing project of B onto it.
    const other = await idp.issuer();
    const pb = await createProject(app.client, b.id, { issuer: other.issuer });
    const moved = await app.client.put(`/api/v1/project/${pb.id}`, { issuer: iss.issuer });
    expect(moved.status).to.equal(409);
    expect(moved.problem.code).to.equal('issuer_in_use');
  });

  it('lets organisations share an issuer when each project requires its own claim; a token of one is refused at the other', async () => {
    const iss = await idp.issuer();
    const a = await createOrganisation(app.client);
    const b = await createOrganisation(app.client);
    const pa = await createProject(app.client, a.id, { issuer: iss.issuer, tokenClaim: { name: 'azp', value: 'app-a' } });
    // The same claim value would accept A's tokens: refused.
    expect((await create(b.id, { issuer: iss.issuer, tokenClaim: { name: 'azp', value: 'app-a' } })).status).to.equal(409);
    const created = await create(b.id, { issuer: iss.issuer, tokenClaim: { name: 'azp', value: 'app-b' } });
    expect(created.status).to.equal(201);
    expect(created.body.tokenClaim).to.deep.equal({ name: 'azp', value: 'app-b' });
    const pb = created.body as { id: number; projectKey: string };

    const forA = await iss.sign({ email: 'shared@example.com', azp: 'app-a' }, { audience: AUDIENCE });
    const forB = await iss.sign({ email: 'shared@example.com', azp: 'app-b' }, { audience: AUDIENCE });
    const unnamed = await iss.sign({ email: 'shared@example.com' }, { audience: AUDIENCE });
    expect((await signin(forA, pa.projectKey)).status).to.equal(200);
    expect((await signin(forB, pb.projectKey)).status).to.equal(200);
    for (const [jwt, key, who] of [
      [forA, pb.projectKey, "A's token at B"],
      [forB, pa.projectKey, "B's token at A"],
      [unnamed, pb.projectKey, 'a token naming no project'],
    ] as const) {
      const res = await signin(jwt, key);
      expect(res.status, who).to.equal(401);
      expect(res.problem.detail, who).to.include('azp: does not name this project');
    }
    // The issuer check shows the claim's outcome.
    const check = await app.client.post(`/api/v1/project/${pb.id}/issuer/check`, { token: forA });
    expect(check.status).to.equal(200);
    expect(check.body.checks).to.deep.include({ name: 'tokenClaim', outcome: 'failed', detail: 'azp: does not name this project' });
    // While another organisation shares the issuer, a project cannot drop its claim.
    const dropped = await app.client.put(`/api/v1/project/${pa.id}`, { tokenClaim: null });
    expect(dropped.status).to.equal(409);
    expect((await app.client.get(`/api/v1/project/${pa.id}`)).body.tokenClaim).to.deep.equal({ name: 'azp', value: 'app-a' });
  });

  it('registers concurrently at most one unbound trust of an issuer across organisations', async () => {
    const iss = await idp.issuer();
    const orgs = await Promise.all([1, 2, 3, 4].map(() => createOrganisation(app.client)));
    const results = await Promise.all(orgs.map((o) => create(o.id, { issuer: iss.issuer })));
    expect(results.map((r) => r.status).sort()).to.deep.equal([201, 409, 409, 409]);
  });

  // A provider that cannot put the service's audience in an ID token (its `aud` is the client id of
  // the customer's application): the project names that audience instead, which binds its tokens to it.
  it("accepts tokens for the project's client id instead of the service's audience, and lets organisations share an issuer by their own client ids", async () => {
    const iss = await idp.issuer();
    const a = await createOrganisation(app.client);
    const b = await createOrganisation(app.client);
    const pa = await create(a.id, { issuer: iss.issuer, audience: 'client-a' });
    expect(pa.status, pa.text).to.equal(201);
    expect(pa.body.audience).to.equal('client-a');
    // Another organisation with the same client id would accept A's tokens: refused; its own is fine.
    expect((await create(b.id, { issuer: iss.issuer, audience: 'client-a' })).problem.code).to.equal('issuer_in_use');
    const pb = await create(b.id, { issuer: iss.issuer, audience: 'client-b' });
    expect(pb.status, pb.text).to.equal(201);

    const forA = await iss.sign({ email: 'ada@example.com', email_verified: true }, { audience: 'client-a' });
    const ok = await signin(forA, pa.body.projectKey);
    expect(ok.status, ok.text).to.equal(200);
    const atB = await signin(forA, pb.body.projectKey);
    expect(atB.status).to.equal(401);
    expect(atB.problem.detail).to.match(/aud/);
    // The service's audience is not this project's any more.
    const serviceAud = await iss.sign({ email: 'ada@example.com', email_verified: true }, { audience: AUDIENCE });
    expect((await signin(serviceAud, pa.body.projectKey)).status).to.equal(401);
    const check = await app.client.post(`/api/v1/project/${pa.body.id}/issuer/check`, { token: forA });
    expect(check.body.ok, check.text).to.equal(true);

    // Without its audience, A would accept every token of the shared issuer: refused.
    const dropped = await app.client.put(`/api/v1/project/${pa.body.id}`, { audience: null });
    expect(dropped.status, dropped.text).to.equal(409);
    expect(dropped.problem.code).to.equal('issuer_in_use');

    // Alone on its issuer, a project may go back to the service's audience.
    const solo = await idp.issuer();
    const c = await createOrganisation(app.client);
    const pc = await create(c.id, { issuer: solo.issuer, audience: 'client-c' });
    const reset = await app.client.put(`/api/v1/project/${pc.body.id}`, { audience: null });
    expect(reset.status, reset.text).to.equal(200);
    expect(reset.body.audience).to.equal(null);
    const soloToken = await solo.sign({ email: 'ada@example.com', email_verified: true }, { audience: AUDIENCE });
    expect((await signin(soloToken, pc.body.projectKey)).status).to.equal(200);
  });
});
