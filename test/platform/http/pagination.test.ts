import { expect } from 'chai';
import { startApp, type TestApp } from '../../support/app.js';
import { createOrganisation, createProject } from '../../support/factories.js';
import { required } from '../../support/http.js';

describe('cursor pagination (section 10)', () => {
  let app: TestApp;
  before(async () => {
    app = await startApp();
  });
  after(() => app.close());

  it('walks a list page by page in id order, ending with nextCursor null', async () => {
    const org = await createOrganisation(app.client);
    const made: number[] = [];
    for (let i = 0; i < 7; i++) made.push((await createProject(app.client, org.id)).id);
    const seen: number[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const q: string = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`;
      const res = await app.client.get(`/api/v1/organisations/${org.id}/projects?limit=3${q}`);
      expect(res.status).to.equal(200);
      expect(res.body.projects.length).to.be.at.most(3);
      seen.push(...res.body.projects.map((p) => p.id));
      cursor = res.body.nextCursor;
      pages++;
    } while (cursor !== null);
    expect(pages).to.equal(3);
    expect(seen).to.deep.equal(made);
  });

  it('defaults to 100 items and accepts up to 1000', async () => {
    const org = await createOrganisation(app.client);
    await createProject(app.client, org.id);
    const res = await app.client.get(`/api/v1/organisations/${org.id}/projects?limit=1000`);
    expect(res.status).to.equal(200);
    expect(res.body.nextCursor).to.equal(null);
  });

  it('refuses a cursor taken from another list', async () => {
    const a = await createOrganisation(app.client);
    const b = await createOrganisation(app.client);
    await createProject(app.client, a.id);
    await createProject(app.client, a.id);
    const page = await app.client.get(`/api/v1/organisations/${a.id}/projects?limit=1`);
    const cursor = required(page.body.nextCursor, 'a next page');
    expect(cursor).to.be.a('string');
    const elsewhere = await app.client.get(`/api/v1/organisations/${b.id}/projects?cursor=${encodeURIComponent(cursor)}`);
    expect(elsewhere.status).to.equal(400);
    expect(elsewhere.problem.errors?.[0]?.path).to.equal('/cursor');
    const otherFilter = await app.client.get(`/api/v1/organisations/${a.id}/projects?showDeleted=true&cursor=${encodeURIComponent(cursor)}`);
    expect(otherFilter.status).to.equal(400);
  });
});
