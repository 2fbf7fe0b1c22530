import { expect } from 'chai';
import { startApp, type TestApp } from '../support/app.js';
import { createOrganisation, createTenant } from '../support/factories.js';

describe('Idempotency-Key on management POSTs (section 2b)', () => {
  let app: TestApp;
  before(async () => {
    app = await startApp();
  });
  after(() => app.close());

  const count = async (table: string) => Number(((await app.db(table).count('* as n').first()) as { n: string | number }).n);

  it('replays the first answer verbatim and creates nothing more', async () => {
    const headers = { 'idempotency-key': `org-${Date.now()}` };
    const first = await app.client.post('/api/v1/organisations', { name: 'Once' }, { headers });
    expect(first.status).to.equal(201);
    const orgs = await count('organisations');
    const second = await app.client.post('/api/v1/organisations', { name: 'Once' }, { headers });
    expect(second.status).to.equal(201);
    expect(second.text).to.equal(first.text);
    expect(second.headers.get('content-type')).to.equal(first.headers.get('content-type'));
    expect(second.headers.get('idempotent-replayed')).to.equal('true');
    expect(await count('organisations')).to.equal(orgs);
  });

  it('replays secrets shown once (a retried key rotation returns the same key, not a second one)', async () => {
    const t = await createTenant(app.client);
    const headers = { 'idempotency-key': 'rotate-1' };
    const first = await app.client.post(`/api/v1/project/${t.project.id}/keys`, { graceSeconds: 0 }, { headers });
    const second = await app.client.post(`/api/v1/project/${t.project.id}/keys`, { graceSeconds: 0 }, { headers });
    expect(first.status).to.equal(200);
    expect(second.body.projectKey).to.equal(first.body.projectKey);
    expect(await app.db('project_keys').where({ project_id: t.project.id })).to.have.length(2);
  });

  it('answers 422 idempotency_key_reused for the same key with another body, method or path', async () => {
    const headers = { 'idempotency-key': 'reuse-me' };
    expect((await app.client.post('/api/v1/organisations', { name: 'A' }, { headers })).status).to.equal(201);
    const otherBody = await app.client.post('/api/v1/organisations', { name: 'B' }, { headers });
    expect(otherBody.status).to.equal(422);
    expect(otherBody.problem.code).to.equal('idempotency_key_reused');
    const org = await createOrganisation(app.client);
    const otherPath = await app.client.post(`/api/v1/organisations/${org.id}/tokens`, { name: 'A' }, { headers });
    expect(otherPath.status).to.equal(422);
  });

  it('scopes keys to the token: another token may use the same key', async () => {
    const t = await createTenant(app.client);
    const headers = { 'idempotency-key': 'shared-key' };
    const a = await t.orgAdmin.post(`/api/v1/organisations/${t.org.id}/tokens`, { name: 'x', role: 'read' }, { headers });
    const b = await app.client.post(`/api/v1/organisations/${t.org.id}/tokens`, { name: 'x', role: 'read' }, { headers });
    expect(a.status).to.equal(201);
    expect(b.status).to.equal(201);
    expect(b.body.id).not.to.equal(a.body.id);
  });

  it('stores 4xx answers too', async () => {
    const headers = { 'idempotency-key': 'bad-once' };
    const first = await app.client.post('/api/v1/organisations', { name: '' }, { headers });
    expect(first.status).to.equal(400);
    const second = await app.client.post('/api/v1/organisations', { name: '' }, { headers });
    expect(second.text).to.equal(first.text);
    expect(second.headers.get('idempotent-replayed')).to.equal('true');
  });

  it('answers 409 request_in_progress while the first request still holds the key', async () => {
    const headers = { 'idempotency-key': 'slow-one' };
    const t = await createTenant(app.client);
    // Hold the key's row lock as an in-flight request would.
    const reservation = await app.client.post(`/api/v1/organisations/${t.org.id}/tokens`, { name: 'n', role: 'read' }, { headers });
    expect(reservation.status).to.equal(201);
    await app.db('idempotency_keys').where({ key: 'slow-one' }).update({ response_status: null, response_body: null });
    const tx = await app.db.transaction();
    try {
      await tx.raw(`SELECT 1 FROM idempotency_keys WHERE key = 'slow-one' FOR UPDATE`);
      const second = await app.client.post(`/api/v1/organisations/${t.org.id}/tokens`, { name: 'n', role: 'read' }, { headers });
      expect(second.status).to.equal(409);
      expect(second.problem.code).to.equal('request_in_progress');
    } finally {
      await tx.rollback();
    }
  });

  it('runs a request afresh when the first one died before answering (no stored answer, lock free)', async () => {
    const headers = { 'idempotency-key': 'orphaned' };
    const first = await app.client.post('/api/v1/organisations', { name: 'First' }, { headers });
    await app.db('idempotency_keys').where({ key: 'orphaned' }).update({ response_status: null, response_body: null });
    const second = await app.client.post('/api/v1/organisations', { name: 'First' }, { headers });
    expect(second.status).to.equal(201);
    expect(second.body.id).not.to.equal(first.body.id);
  });

  it('forgets a key after its time to live', async () => {
    const headers = { 'idempotency-key': 'expiring' };
    const first = await app.client.post('/api/v1/organisations', { name: 'E' }, { headers });
    await app
      .db('idempotency_keys')
      .where({ key: 'expiring' })
      .update({ expires_at: app.db.raw(`now() - interval '1 second'`) });
    const second = await app.client.post('/api/v1/organisations', { name: 'Other body is fine now' }, { headers });
    expect(second.status).to.equal(201);
    expect(second.body.id).not.to.equal(first.body.id);
  });

  it('leaves requests without the header alone', async () => {
    const before = await count('idempotency_keys');
    await createOrganisation(app.client);
    expect(await count('idempotency_keys')).to.equal(before);
  });
});
