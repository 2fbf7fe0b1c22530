import { expect } from 'chai';
import { hashSecret } from '../../../src/platform/crypto/secrets.js';
import { findProjectByKeyHash } from '../../../src/access/tenancy/project-key.js';
import { startApp, type TestApp } from '../../support/app.js';
import { createOrganisation, createTenant } from '../../support/factories.js';

describe('organisations', () => {
  let app: TestApp;
  before(async () => {
    app = await startApp();
  });
  after(() => app.close());

  it('creates (201), gets, renames and lists an organisation with the record of section 10', async () => {
    const created = await app.client.post('/api/v1/organisations', { name: 'Acme' });
    expect(created.status).to.equal(201);
    expect(created.body).to.have.all.keys('id', 'name', 'createdAt', 'updatedAt', 'deletedAt');
    expect(created.body.id).to.be.a('number');
    expect(created.body.createdAt).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(created.body.deletedAt).to.equal(null);

    const got = await app.client.get(`/api/v1/organisations/${created.body.id}`);
    expect(got.status).to.equal(200);
    expect(got.body.name).to.equal('Acme');

    const renamed = await app.client.put(`/api/v1/organisations/${created.body.id}`, { name: 'Acme Ltd' });
    expect(renamed.status).to.equal(200);
    expect(renamed.body.name).to.equal('Acme Ltd');

    const list = await app.client.get('/api/v1/organisations?limit=1000');
    expect(list.status).to.equal(200);
    expect(list.body).to.have.all.keys('organisations', 'nextCursor');
    expect(list.body.organisations.map((o: { id: number }) => o.id)).to.include(created.body.id);
  });

  it('soft-deletes (204): hidden unless showDeleted, 404 for PUT and DELETE, undelete (200) restores, 409 when active', async () => {
    const org = await createOrganisation(app.client);
    expect((await app.client.delete(`/api/v1/organisations/${org.id}`)).status).to.equal(204);

    const ids = async (q: string) => (await app.client.get(`/api/v1/organisations?limit=1000${q}`)).body.organisations.map((o) => o.id);
    expect(await ids('')).not.to.include(org.id);
    expect(await ids('&showDeleted=true')).to.include(org.id);
    expect(await ids('&showDeleted=false')).not.to.include(org.id);

    const put = await app.client.put(`/api/v1/organisations/${org.id}`, { name: 'x' });
    expect(put.status).to.equal(404);
    expect(put.problem.code).to.equal('not_found');
    expect((await app.client.delete(`/api/v1/organisations/${org.id}`)).status).to.equal(404);
    const seen = await app.client.get(`/api/v1/organisations/${org.id}`);
    expect(seen.status).to.equal(200);
    expect(seen.body.deletedAt).to.be.a('string');

    const undeleted = await app.client.post(`/api/v1/organisations/${org.id}/undelete`);
    expect(undeleted.status).to.equal(200);
    expect(undeleted.body.deletedAt).to.equal(null);
    expect(await ids('')).to.include(org.id);

    const again = await app.client.post(`/api/v1/organisations/${org.id}/undelete`);
    expect(again.status).to.equal(409);
    expect(again.problem.code).to.equal('not_deleted');
  });

  it('answers 404 for an organisation that does not exist', async () => {
    for (const res of [
      await app.client.get('/api/v1/organisations/999999999'),
      await app.client.put('/api/v1/organisations/999999999', { name: 'x' }),
      await app.client.delete('/api/v1/organisations/999999999'),
      await app.client.post('/api/v1/organisations/999999999/undelete'),
    ]) {
      expect(res.status).to.equal(404);
      expect(res.problem.code).to.equal('not_found');
    }
  });

  it('stops the tokens and project keys of a soft-deleted organisation and restores them on undelete', async () => {
    const t = await createTenant(app.client);
    const keyWorks = async () => (await findProjectByKeyHash(app.db, hashSecret(t.project.projectKey), 'testnet')) !== undefined;
    expect((await t.orgAdmin.get(`/api/v1/organisations/${t.org.id}`)).status).to.equal(200);
    expect((await t.projectRead.get(`/api/v1/project/${t.project.id}`)).status).to.equal(200);
    expect(await keyWorks()).to.equal(true);

    expect((await app.client.delete(`/api/v1/organisations/${t.org.id}`)).status).to.equal(204);
    for (const client of [t.orgAdmin, t.orgRead, t.projectAdmin, t.projectRead]) {
      const res = await client.get(`/api/v1/project/${t.project.id}`);
      expect(res.status).to.equal(401);
      expect(res.problem.code).to.equal('unauthorized');
    }
    expect(await keyWorks()).to.equal(false);
    expect((await app.client.get(`/api/v1/project/${t.project.id}`)).status).to.equal(404);

    expect((await app.client.post(`/api/v1/organisations/${t.org.id}/undelete`)).status).to.equal(200);
    expect((await t.orgAdmin.get(`/api/v1/organisations/${t.org.id}`)).status).to.equal(200);
    expect((await t.projectRead.get(`/api/v1/project/${t.project.id}`)).status).to.equal(200);
    expect(await keyWorks()).to.equal(true);
  });

  it('lets an organisation token list and get only its own organisation', async () => {
    const a = await createTenant(app.client);
    const b = await createOrganisation(app.client);
    const list = await a.orgRead.get('/api/v1/organisations?showDeleted=true');
    expect(list.status).to.equal(200);
    expect(list.body.organisations.map((o: { id: number }) => o.id)).to.deep.equal([a.org.id]);
    expect((await a.orgRead.get(`/api/v1/organisations/${b.id}`)).status).to.equal(404);
    expect((await a.projectAdmin.get('/api/v1/organisations')).status).to.equal(403);
  });
});
