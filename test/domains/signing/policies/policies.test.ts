import { expect } from 'chai';
import { startApp, type TestApp } from '../../../support/app.js';
import { createTenant } from '../../../support/factories.js';
import { signInMessage as hello, siwePolicy as siwe } from '../../../support/policies.js';

/** The project's signing policy through the API: kept by the signer, versioned, checked, audited. */
describe('signing policies through the API', function () {
  this.timeout(60_000);
  let app: TestApp;
  before(async () => {
    app = await startApp();
  });
  after(() => app.close());

  it('starts with no policy (404 no_policy; a dry run says nothing is allowed), then keeps each change as a new version', async () => {
    const t = await createTenant(app.client);
    const base = `/api/v1/project/${t.project.id}/policy` as const;
    const none = await t.projectRead.get(base);
    expect(none.status).to.equal(404);
    expect(none.problem.code).to.equal('no_policy');
    const dry = await t.projectRead.post(`${base}/evaluate`, { caller: 'user', ...hello });
    expect(dry.status, dry.text).to.equal(200);
    expect(dry.body).to.include({ allowed: false, rule: null, policyVersion: 0 });

    const first = await t.projectAdmin.put(base, siwe);
    expect(first.status, first.text).to.equal(201);
    expect(first.body).to.deep.include({ version: 1, policy: siwe, author: `token:${t.tokens.projectAdmin.id}` });
    expect((await t.projectRead.post(`${base}/evaluate`, { caller: 'user', ...hello })).body).to.include({
      allowed: true,
      rule: 'sign-in messages',
      policyVersion: 1,
    });
    expect((await t.projectRead.post(`${base}/evaluate`, hello)).body, 'the backend by default').to.include({ allowed: false, policyVersion: 1 });

    const stale = await t.projectAdmin.put(`${base}?ifVersion=0`, { rules: [] });
    expect(stale.status).to.equal(409);
    expect(stale.problem.code).to.equal('policy_conflict');
    expect((await t.projectAdmin.put(`${base}?ifVersion=1`, { rules: [] })).body).to.include({ version: 2 });
    expect((await t.orgAdmin.put(base, siwe)).body).to.include({ version: 3, author: `token:${t.tokens.orgAdmin.id}` });
    expect((await t.projectRead.get(base)).body).to.deep.include({ version: 3, policy: siwe });

    const page1 = await t.projectRead.get(`${base}/versions?limit=2`);
    expect(page1.body.versions.map((v) => v.version)).to.deep.equal([1, 2]);
    const cursor = page1.body.nextCursor;
    expect(cursor).to.be.a('string');
    const page2 = await t.projectRead.get(`${base}/versions?limit=2&cursor=${encodeURIComponent(cursor ?? '')}`);
    expect(page2.body.versions.map((v) => v.version)).to.deep.equal([3]);
    expect(page2.body.nextCursor).to.equal(null);
  });

  it('refuses a policy the signer cannot read, naming the field, and changes nothing', async () => {
    const t = await createTenant(app.client);
    const base = `/api/v1/project/${t.project.id}/policy` as const;
    await t.projectAdmin.put(base, siwe);
    const bad = await t.projectAdmin.put(base, {
      rules: [{ name: 'r', action: 'allow', method: 'eth_signTransaction', conditions: [{ field: 'to', op: 'lt', value: '0x12' }] }],
    });
    expect(bad.status, bad.text).to.equal(400);
    expect(bad.problem.code).to.equal('invalid_policy');
    expect(bad.problem.errors?.[0]?.path).to.equal('/rules/0/conditions/0/op');
    const shape = await t.projectAdmin.put(base, { rules: [{ name: 'r', action: 'maybe', method: 'personal_sign' }] });
    expect(shape.status).to.equal(400);
    const badOp = await t.projectRead.post(`${base}/evaluate`, { method: 'eth_signTransaction', params: { transaction: { chainId: 0 } } });
    expect(badOp.status).to.equal(400);
    expect(badOp.problem.code).to.equal('invalid_operation');
    expect((await t.projectRead.get(base)).body.version, 'nothing written').to.equal(1);
  });

  it('lets admins write and read tokens read; another tenant sees nothing; every change is in the audit log', async () => {
    const t = await createTenant(app.client);
    const other = await createTenant(app.client);
    const base = `/api/v1/project/${t.project.id}/policy` as const;
    expect((await t.projectRead.put(base, siwe)).status).to.equal(403);
    expect((await t.orgRead.put(base, siwe)).status).to.equal(403);
    expect((await other.orgAdmin.put(base, siwe)).status).to.equal(404);
    expect((await other.orgAdmin.get(base)).status).to.equal(404);
    expect((await t.projectAdmin.put(base, siwe)).status).to.equal(201);
    const audit = await t.orgAdmin.get(`/api/v1/organisations/${t.org.id}/audit`);
    expect(audit.status, audit.text).to.equal(200);
    const entry = audit.body.entries.find((e) => e.action.includes('policy'));
    expect(entry, JSON.stringify(audit.body.entries.map((e) => e.action))).to.not.equal(undefined);
  });
});
