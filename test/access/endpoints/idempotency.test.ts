import { expect } from 'chai';
import { startApp, type TestApp } from '../../support/app.js';
import { createOrganisation, createTenant } from '../../support/factories.js';
import type { Reply } from '../../support/http.js';
import { until } from '../../support/wait.js';

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

  /**
   * Token creations wait at their INSERT, in their change's transaction, until `release`: a
   * request held mid-handler. SHARE mode lets authentication read the table meanwhile.
   */
  async function holdTokenInserts() {
    const lock = await app.db.transaction();
    await lock.raw('LOCK TABLE api_tokens IN SHARE MODE');
    return { release: () => lock.rollback() };
  }
  const insertsWaiting = async () =>
    Number(
      (
        await app.db.raw<{ rows: Array<{ n: string }> }>(
          `SELECT count(*) AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE 'insert into "api_tokens"%'`,
        )
      ).rows[0]?.n,
    );
  const tokensNamed = async (name: string) => Number(((await app.db('api_tokens').where({ name }).count('* as n').first()) as { n: string | number }).n);

  it('answers 409 request_in_progress while the first request runs, then replays its answer', async () => {
    const t = await createTenant(app.client);
    const headers = { 'idempotency-key': 'slow-one' };
    const body = { name: 'slow', role: 'read' };
    const held = await holdTokenInserts();
    let first: Promise<Reply<unknown>> | undefined;
    try {
      first = t.orgAdmin.post(`/api/v1/organisations/${t.org.id}/tokens`, body, { headers });
      await until('the first request at its insert', async () => (await insertsWaiting()) === 1);
      const second = await t.orgAdmin.post(`/api/v1/organisations/${t.org.id}/tokens`, body, { headers });
      expect(second.status).to.equal(409);
      expect(second.problem.code).to.equal('request_in_progress');
      const otherBody = await t.orgAdmin.post(`/api/v1/organisations/${t.org.id}/tokens`, { ...body, name: 'other' }, { headers });
      expect(otherBody.status, 'another body is refused even while the first runs').to.equal(422);
    } finally {
      await held.release();
    }
    const answered = await first;
    expect(answered?.status).to.equal(201);
    const replay = await t.orgAdmin.post(`/api/v1/organisations/${t.org.id}/tokens`, body, { headers });
    expect(replay.headers.get('idempotent-replayed')).to.equal('true');
    expect(replay.text).to.equal(answered?.text);
    expect(await tokensNamed('slow')).to.equal(1);
  });

  it('runs one of many concurrent requests with one key; the others get 409 or its replay', async () => {
    const t = await createTenant(app.client);
    const headers = { 'idempotency-key': 'stampede' };
    const body = { name: 'stampede', role: 'read' };
    const answers = await Promise.all(Array.from({ length: 8 }, () => t.orgAdmin.post(`/api/v1/organisations/${t.org.id}/tokens`, body, { headers })));
    const ran = answers.filter((a) => a.status === 201 && a.headers.get('idempotent-replayed') === null);
    expect(ran).to.have.length(1);
    for (const a of answers) {
      if (a.status === 409) expect(a.problem.code).to.equal('request_in_progress');
      else expect(a.text).to.equal(ran[0]?.text);
    }
    expect(await tokensNamed('stampede')).to.equal(1);
  });

  it('takes over the record of a request that died without an answer once its lease ended, not before', async () => {
    const headers = { 'idempotency-key': 'orphaned' };
    const first = await app.client.post('/api/v1/organisations', { name: 'First' }, { headers });
    // As a request whose process died after it claimed the record leaves it.
    const orphan = () => app.db('idempotency_keys').where({ key: 'orphaned' });
    await orphan().update({ response_status: null, response_content_type: null, response_body: null });
    const early = await app.client.post('/api/v1/organisations', { name: 'First' }, { headers });
    expect(early.status, 'the lease still runs').to.equal(409);
    await orphan().update({ lease_until: app.db.raw(`now() - interval '1 second'`) });
    const other = await app.client.post('/api/v1/organisations', { name: 'Not the same request' }, { headers });
    expect(other.status, 'a lapsed record is taken over by the same request only').to.equal(422);
    const second = await app.client.post('/api/v1/organisations', { name: 'First' }, { headers });
    expect(second.status).to.equal(201);
    expect(second.headers.get('idempotent-replayed')).to.equal(null);
    expect(second.body.id).not.to.equal(first.body.id);
  });

  it('commits nothing for a request that outlived its lease and lost the record: the one that took it over answers', async () => {
    const t = await createTenant(app.client);
    const headers = { 'idempotency-key': 'outlived' };
    const body = { name: 'outlived', role: 'read' };
    const path = `/api/v1/organisations/${t.org.id}/tokens` as const;
    const held = await holdTokenInserts();
    let slow: Promise<Reply<unknown>> | undefined;
    let taker: Promise<Reply<unknown>> | undefined;
    try {
      slow = t.orgAdmin.post(path, body, { headers });
      await until('the first request at its insert', async () => (await insertsWaiting()) === 1);
      await app
        .db('idempotency_keys')
        .where({ key: 'outlived' })
        .update({ lease_until: app.db.raw(`now() - interval '1 second'`) });
      taker = t.orgAdmin.post(path, body, { headers });
      await until('the second request at its insert', async () => (await insertsWaiting()) === 2);
    } finally {
      await held.release();
    }
    const [lost, won] = await Promise.all([slow, taker]);
    expect(lost?.status).to.equal(409);
    expect(lost?.problem.code).to.equal('request_in_progress');
    expect(won?.status).to.equal(201);
    expect(await tokensNamed('outlived'), "the first request's insert rolled back").to.equal(1);
    const replay = await t.orgAdmin.post(path, body, { headers });
    expect(replay.text).to.equal(won?.text);
  });

  it('gives the record up on a 5xx: a retry runs afresh instead of replaying the failure or answering 409', async () => {
    const t = await createTenant(app.client);
    const headers = { 'idempotency-key': 'failed-once' };
    const body = { name: 'failed-once', role: 'read' };
    const path = `/api/v1/organisations/${t.org.id}/tokens` as const;
    const held = await holdTokenInserts();
    let failed: Reply<unknown> | undefined;
    try {
      const pending = t.orgAdmin.post(path, body, { headers });
      await until('the request at its insert', async () => (await insertsWaiting()) === 1);
      // Its database connection ends under it (57P01): 503, as when PostgreSQL restarts.
      await app.db.raw(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE 'insert into "api_tokens"%'`,
      );
      failed = await pending;
    } finally {
      await held.release();
    }
    expect(failed?.status).to.equal(503);
    expect(await app.db('idempotency_keys').where({ key: 'failed-once' })).to.have.length(0);
    const retry = await t.orgAdmin.post(path, body, { headers });
    expect(retry.status).to.equal(201);
    expect(retry.headers.get('idempotent-replayed')).to.equal(null);
    expect(await tokensNamed('failed-once')).to.equal(1);
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
