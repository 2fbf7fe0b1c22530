import { expect } from 'chai';
import { hashSecret } from '../../../src/platform/crypto/secrets.js';
import { startApp, type TestApp } from '../../support/app.js';
import { snapshot } from '../../support/db.js';
import { createOrganisation, createProject, createTenant, createToken } from '../../support/factories.js';
import type { Client } from '../../support/http.js';

interface Call {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  json?: unknown;
}

/** Every management request that touches one tenant's resources. */
function tenantCalls(orgId: number, projectId: number, tokenId: number): Call[] {
  return [
    { method: 'GET', path: `/api/v1/organisations/${orgId}` },
    { method: 'PUT', path: `/api/v1/organisations/${orgId}`, json: { name: 'taken over' } },
    { method: 'DELETE', path: `/api/v1/organisations/${orgId}` },
    { method: 'POST', path: `/api/v1/organisations/${orgId}/undelete` },
    { method: 'GET', path: `/api/v1/organisations/${orgId}/projects` },
    { method: 'POST', path: `/api/v1/organisations/${orgId}/projects`, json: { name: 'p', issuer: `https://idp.example.com/org-${orgId}` } },
    { method: 'GET', path: `/api/v1/project/${projectId}` },
    { method: 'PUT', path: `/api/v1/project/${projectId}`, json: { name: 'renamed' } },
    { method: 'DELETE', path: `/api/v1/project/${projectId}` },
    { method: 'POST', path: `/api/v1/project/${projectId}/keys`, json: { graceSeconds: 0 } },
    { method: 'POST', path: `/api/v1/project/${projectId}/walletWebhook/secret` },
    { method: 'GET', path: `/api/v1/organisations/${orgId}/tokens` },
    { method: 'POST', path: `/api/v1/organisations/${orgId}/tokens`, json: { name: 't', role: 'admin' } },
    { method: 'DELETE', path: `/api/v1/organisations/${orgId}/tokens/${tokenId}` },
  ];
}

const send = (client: Client, call: Call) => client.request(call.method, call.path, call.json === undefined ? {} : { json: call.json });

describe('API tokens and management authorisation', () => {
  let app: TestApp;
  before(async () => {
    app = await startApp();
  });
  after(() => app.close());

  it('creates a token (201, secret shown once), lists it without the secret, stores only its hash, and revokes it at once', async () => {
    const org = await createOrganisation(app.client);
    const res = await app.client.post(`/api/v1/organisations/${org.id}/tokens`, { name: 'ci', role: 'admin' });
    expect(res.status).to.equal(201);
    expect(res.body).to.include({ name: 'ci', role: 'admin', scope: 'organisation', projectId: null });
    expect(res.body).to.have.all.keys('id', 'name', 'role', 'scope', 'organisationId', 'projectId', 'createdAt', 'revokedAt', 'token');
    expect(res.body.token).to.match(/^sk_test_[A-Za-z0-9_-]{43}$/);

    const stored = await app.db('api_tokens').where({ id: res.body.id }).first();
    expect(Buffer.compare(stored.token_hash, hashSecret(res.body.token))).to.equal(0);
    expect(JSON.stringify(stored)).not.to.include(res.body.token);

    const list = await app.client.get(`/api/v1/organisations/${org.id}/tokens`);
    expect(list.status).to.equal(200);
    expect(list.body.tokens).to.have.length(1);
    expect(list.text).not.to.include(res.body.token);

    const own = app.client.withToken(res.body.token);
    expect((await own.get(`/api/v1/organisations/${org.id}`)).status).to.equal(200);
    expect((await app.client.delete(`/api/v1/organisations/${org.id}/tokens/${res.body.id}`)).status).to.equal(204);
    const after = await own.get(`/api/v1/organisations/${org.id}`);
    expect(after.status).to.equal(401);
    expect(after.headers.get('www-authenticate')).to.equal('Bearer');
    expect((await app.client.get(`/api/v1/organisations/${org.id}/tokens`)).body.tokens).to.have.length(0);
    expect((await app.client.get(`/api/v1/organisations/${org.id}/tokens?showRevoked=true`)).body.tokens[0]?.revokedAt).to.be.a('string');
    expect((await app.client.delete(`/api/v1/organisations/${org.id}/tokens/999999999`)).status).to.equal(404);
  });

  it('answers 401 for a missing, malformed or unknown token', async () => {
    for (const token of [null, '', 'sk_test_unknown', 'x'.repeat(600)]) {
      const res = await app.client.get('/api/v1/organisations', { token });
      expect(res.status).to.equal(401);
      expect(res.problem.code).to.equal('unauthorized');
    }
    const basic = await app.client.get('/api/v1/organisations', { token: null, headers: { authorization: 'Basic dXNlcjpwYXNz' } });
    expect(basic.status).to.equal(401);
  });

  it('answers each of many requests at once by its own token (looked up together): its own tenant, 404 for the other, 401 when unknown or revoked', async () => {
    const a = await createTenant(app.client);
    const b = await createTenant(app.client);
    const revoked = await createToken(app.client, a.org.id, 'admin');
    expect((await app.client.delete(`/api/v1/organisations/${a.org.id}/tokens/${revoked.id}`)).status).to.equal(204);
    const callers = [
      { client: a.orgAdmin, project: a.project.id, status: 200 },
      { client: b.projectRead, project: b.project.id, status: 200 },
      { client: a.projectRead, project: b.project.id, status: 404 },
      { client: app.client.withToken(revoked.token), project: a.project.id, status: 401 },
      { client: app.client.withToken('sk_test_unknown'), project: a.project.id, status: 401 },
      { client: b.orgRead, project: a.project.id, status: 404 },
    ];
    const calls = Array.from({ length: 60 }, (_, i) => callers[i % callers.length]!);
    const answers = await Promise.all(calls.map((c) => c.client.get(`/api/v1/project/${c.project}`)));
    expect(answers.map((r) => r.status)).to.deep.equal(calls.map((c) => c.status));
    answers.forEach((r, i) => {
      if (r.status === 200) expect(r.body.id).to.equal(calls[i]!.project);
    });
  });

  it('gives a token of organisation A 404 for every resource of organisation B, whatever its role, and changes nothing', async () => {
    const a = await createTenant(app.client);
    const b = await createTenant(app.client);
    for (const client of [a.orgAdmin, a.orgRead, a.projectAdmin, a.projectRead]) {
      for (const call of tenantCalls(b.org.id, b.project.id, b.tokens.orgRead.id)) {
        const before = await snapshot(app.db);
        const res = await send(client, call);
        expect(res.status, `${call.method} ${call.path}: ${res.text}`).to.equal(404);
        expect(res.problem.code).to.equal('not_found');
        expect(await snapshot(app.db)).to.deep.equal(before);
      }
    }
  });

  it('gives a read token 403 on every write inside its scope, and changes nothing', async () => {
    const t = await createTenant(app.client);
    const orgWrites = tenantCalls(t.org.id, t.project.id, t.tokens.orgAdmin.id).filter((c) => c.method !== 'GET');
    for (const call of orgWrites) {
      const before = await snapshot(app.db);
      const res = await send(t.orgRead, call);
      expect(res.status, `${call.method} ${call.path}: ${res.text}`).to.equal(403);
      expect(res.problem.code).to.equal('forbidden');
      expect(await snapshot(app.db)).to.deep.equal(before);
    }
    const projectWrites: Call[] = [
      { method: 'PUT', path: `/api/v1/project/${t.project.id}`, json: { name: 'x' } },
      { method: 'DELETE', path: `/api/v1/project/${t.project.id}` },
      { method: 'POST', path: `/api/v1/project/${t.project.id}/keys` },
      { method: 'POST', path: `/api/v1/project/${t.project.id}/walletWebhook/secret` },
    ];
    for (const call of projectWrites) {
      const res = await send(t.projectRead, call);
      expect(res.status, `${call.method} ${call.path}`).to.equal(403);
    }
    // Reads in scope work.
    expect((await t.orgRead.get(`/api/v1/organisations/${t.org.id}/projects`)).status).to.equal(200);
    expect((await t.orgRead.get(`/api/v1/organisations/${t.org.id}/tokens`)).status).to.equal(200);
    expect((await t.projectRead.get(`/api/v1/project/${t.project.id}`)).status).to.equal(200);
  });

  it('applies the table of section 3 to admins: operator-only actions are 403, project admins update only their project', async () => {
    const t = await createTenant(app.client);
    expect((await t.orgAdmin.post('/api/v1/organisations', { name: 'mine' })).status).to.equal(403);
    expect((await t.orgAdmin.delete(`/api/v1/organisations/${t.org.id}`)).status).to.equal(403);
    expect((await t.orgAdmin.put(`/api/v1/organisations/${t.org.id}`, { name: 'renamed by admin' })).status).to.equal(200);
    const p2 = await createProject(t.orgAdmin, t.org.id);
    expect((await t.orgAdmin.post(`/api/v1/project/${p2.id}/keys`)).status).to.equal(200);

    expect((await t.projectAdmin.put(`/api/v1/project/${t.project.id}`, { name: 'by project admin' })).status).to.equal(200);
    expect((await t.projectAdmin.post(`/api/v1/project/${t.project.id}/keys`)).status).to.equal(403);
    expect((await t.projectAdmin.delete(`/api/v1/project/${t.project.id}`)).status).to.equal(403);
    // A project token sees only its own project.
    expect((await t.projectAdmin.get(`/api/v1/project/${p2.id}`)).status).to.equal(404);
    expect((await t.projectAdmin.get(`/api/v1/organisations/${t.org.id}/projects`)).status).to.equal(404);
  });

  it('never lets a token mint one above its own scope', async () => {
    const a = await createTenant(app.client);
    const b = await createTenant(app.client);
    // A project token cannot reach token management at all.
    const fromProject = await a.projectAdmin.post(`/api/v1/organisations/${a.org.id}/tokens`, { name: 'up', role: 'admin' });
    expect(fromProject.status).to.equal(404);
    // A read token cannot mint.
    expect((await a.orgRead.post(`/api/v1/organisations/${a.org.id}/tokens`, { name: 'up', role: 'read' })).status).to.equal(403);
    // An organisation admin cannot mint for another organisation's project.
    const cross = await a.orgAdmin.post(`/api/v1/organisations/${a.org.id}/tokens`, { name: 'x', role: 'admin', projectId: b.project.id });
    expect(cross.status).to.equal(404);
    // ... but can mint within its organisation, and the minted project token is confined to its project.
    const minted = await createToken(a.orgAdmin, a.org.id, 'admin', a.project.id);
    const client = app.client.withToken(minted.token);
    expect((await client.get(`/api/v1/project/${a.project.id}`)).status).to.equal(200);
    expect((await client.get(`/api/v1/organisations/${a.org.id}`)).status).to.equal(404);
  });

  it('mints signer tokens for one project only; they read and may not manage', async () => {
    const t = await createTenant(app.client);
    const orgWide = await t.orgAdmin.post(`/api/v1/organisations/${t.org.id}/tokens`, { name: 'backend', role: 'signer' });
    expect(orgWide.status, orgWide.text).to.equal(400);
    expect(orgWide.problem.errors?.[0]?.path).to.equal('/projectId');
    const minted = await t.orgAdmin.post(`/api/v1/organisations/${t.org.id}/tokens`, { name: 'backend', role: 'signer', projectId: t.project.id });
    expect(minted.status, minted.text).to.equal(201);
    expect(minted.body).to.include({ role: 'signer', scope: 'project', projectId: t.project.id });
    const signer = app.client.withToken(minted.body.token);
    expect((await signer.get(`/api/v1/project/${t.project.id}/wallets`)).status).to.equal(200);
    expect((await signer.get(`/api/v1/project/${t.project.id}`)).status).to.equal(200);
    const write = await signer.put(`/api/v1/project/${t.project.id}/policy`, { rules: [] });
    expect(write.status).to.equal(403);
    expect(write.problem.detail).to.match(/signer role; writes need an admin token/);
    expect((await signer.post('/api/v1/membership/issue', [{ membershipType: 'gym:gold', walletAddress: `0x${'1'.repeat(40)}` }])).status).to.equal(403);
  });

  it('stops a project token when its project is deleted', async () => {
    const t = await createTenant(app.client);
    expect((await app.client.delete(`/api/v1/project/${t.project.id}`)).status).to.equal(204);
    expect((await t.projectRead.get(`/api/v1/project/${t.project.id}`)).status).to.equal(401);
    expect((await t.orgRead.get(`/api/v1/organisations/${t.org.id}`)).status).to.equal(200);
  });
});
