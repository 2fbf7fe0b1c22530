import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { required } from './support/http.js';
import { startApp, type TestApp } from './support/app.js';
import { sharedSigner } from './support/signer.js';
import { SecretBox } from '../src/platform/crypto/secrets.js';
import { recordAad } from '../src/platform/idempotency/repository.js';

/** Every row of every table as text (PostgreSQL's own rendering of each row). */
async function everyRow(app: TestApp): Promise<string> {
  const { rows: tables } = await app.db.raw<{ rows: Array<{ tablename: string }> }>(
    `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`,
  );
  const parts: string[] = [];
  for (const { tablename } of tables) {
    const { rows } = await app.db.raw<{ rows: Array<{ r: string }> }>(`SELECT t::text AS r FROM ?? t`, [tablename]);
    parts.push(...rows.map((r) => `${tablename}: ${r.r}`));
  }
  return parts.join('\n');
}

describe('no secret at rest in clear, anywhere', function () {
  this.timeout(60_000);
  let app: TestApp;
  before(async () => {
    app = await startApp();
  });
  after(() => app.close());

  it('every kind of shown-once secret, made through idempotent requests, is in no column of any table and in no log line; replays still answer it', async () => {
    const idem = () => ({ headers: { 'idempotency-key': randomUUID() } });
    const secrets: Array<[string, string]> = [
      ['operator token', app.operatorToken],
      ['signer bearer secret', sharedSigner().token],
      ['data encryption key', app.dataEncryptionKey.toString('base64')],
    ];

    const orgOpts = idem();
    const org = await app.client.post('/api/v1/organisations', { name: 'Secrets' }, orgOpts);
    expect(org.status).to.equal(201);
    const projectOpts = idem();
    const project = await app.client.post(
      `/api/v1/organisations/${org.body.id}/projects`,
      { name: 'Secrets', issuer: `https://idp.example.com/org-${org.body.id}`, walletWebhookUrl: 'https://hooks.example.com/w' },
      projectOpts,
    );
    expect(project.status, project.text).to.equal(201);
    secrets.push(['project key', project.body.projectKey], ['wallet webhook secret', required(project.body.walletWebhookSecret)]);
    const tokenOpts = idem();
    const token = await app.client.post(`/api/v1/organisations/${org.body.id}/tokens`, { name: 't', role: 'admin' }, tokenOpts);
    expect(token.status).to.equal(201);
    secrets.push(['API token', token.body.token]);
    const rotated = await app.client.post(`/api/v1/project/${project.body.id}/keys`, { graceSeconds: 60 }, idem());
    secrets.push(['rotated project key', rotated.body.projectKey]);
    const walletSecret = await app.client.post(`/api/v1/project/${project.body.id}/walletWebhook/secret`, undefined, idem());
    expect(walletSecret.status, walletSecret.text).to.equal(200);
    secrets.push(['rotated wallet webhook secret', walletSecret.body.walletWebhookSecret]);
    const hookOpts = idem();
    const hook = await app.client.post(`/api/v1/project/${project.body.id}/webhooks`, { url: 'https://hooks.example.com/s', events: ['*'] }, hookOpts);
    expect(hook.status, hook.text).to.equal(201);
    secrets.push(['subscription secret', required(hook.body.secret)]);
    const given = `whsec_${Buffer.alloc(32, 5).toString('base64')}`;
    const hookGiven = await app.client.post(
      `/api/v1/project/${project.body.id}/webhooks`,
      { url: 'https://hooks.example.com/g', events: ['*'], secret: given },
      idem(),
    );
    expect(hookGiven.status, hookGiven.text).to.equal(201);
    secrets.push(['subscription secret given by the caller', given]);
    const hookRotated = await app.client.post(`/api/v1/project/${project.body.id}/webhooks/${hook.body.id}/secret`, undefined, idem());
    expect(hookRotated.status, hookRotated.text).to.equal(200);
    secrets.push(['rotated subscription secret', hookRotated.body.secret]);

    const rows = await everyRow(app);
    const logs = app.logs.join('\n');
    expect(rows).to.include('idempotency_keys');
    for (const [name, secret] of secrets) {
      expect(secret, name).to.be.a('string').with.length.greaterThan(20);
      // The secret itself, and for whsec_ secrets the key bytes in base64 on their own.
      const forms = [secret, secret.replace(/^whsec_/, '')];
      for (const form of forms) {
        expect(rows.includes(form), `${name} in the database`).to.equal(false);
        expect(logs.includes(form), `${name} in the logs`).to.equal(false);
      }
    }

    // Replays open the sealed answers: the same secrets, once more, to the same caller.
    const again = await app.client.post(`/api/v1/organisations/${org.body.id}/tokens`, { name: 't', role: 'admin' }, tokenOpts);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(again.body.token).to.equal(token.body.token);
    const projectAgain = await app.client.post(
      `/api/v1/organisations/${org.body.id}/projects`,
      { name: 'Secrets', issuer: `https://idp.example.com/org-${org.body.id}`, walletWebhookUrl: 'https://hooks.example.com/w' },
      projectOpts,
    );
    expect(projectAgain.body.projectKey).to.equal(project.body.projectKey);
    const hookAgain = await app.client.post(`/api/v1/project/${project.body.id}/webhooks`, { url: 'https://hooks.example.com/s', events: ['*'] }, hookOpts);
    expect(hookAgain.body.secret).to.equal(hook.body.secret);
  });

  it("a sealed answer is bound to its record: under another record's binding it does not open", async () => {
    const first = await app.client.post('/api/v1/organisations', { name: 'Bound' }, { headers: { 'idempotency-key': 'bound-1' } });
    expect(first.status).to.equal(201);
    const { rows } = await app.db.raw<{ rows: Array<{ principal: string; fingerprint: string; response_body: string }> }>(
      `SELECT principal, fingerprint, response_body FROM idempotency_keys WHERE key = 'bound-1'`,
    );
    const row = rows[0];
    if (!row) throw new Error('no idempotency record');
    expect(row.response_body).to.match(/^v2\.[A-Za-z0-9_-]{8}\./);
    const box = new SecretBox(app.dataEncryptionKey);
    expect(JSON.parse(box.open(row.response_body, recordAad(row.principal, 'bound-1', row.fingerprint)))).to.deep.equal(first.body);
    expect(() => box.open(row.response_body, recordAad(row.principal, 'bound-2', row.fingerprint))).to.throw();
    expect(() => box.open(row.response_body, recordAad('operator:other', 'bound-1', row.fingerprint))).to.throw();
  });
});
