import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { hashSecret, SecretBox } from '../../../src/platform/crypto/secrets.js';
import { walletSecretAad } from '../../../src/domains/webhooks/secrets.js';
import type { ProjectRow } from '../../../src/domains/projects/repository.js';
import { findProjectByKeyHash } from '../../../src/access/tenancy/project-key.js';
import { startApp, type TestApp } from '../../support/app.js';
import { createOrganisation, createProject } from '../../support/factories.js';
import { required } from '../../support/http.js';

describe('projects', () => {
  let app: TestApp;
  before(async () => {
    app = await startApp();
  });
  after(() => app.close());

  const keyProject = async (key: string) => (await findProjectByKeyHash(app.db, hashSecret(key), 'testnet'))?.id;
  const row = async (id: number) => (await app.db('projects').where({ id }).first()) as ProjectRow;

  it('creates a project with a pk_test_ key and a generated whsec_ secret, both shown once and stored only hashed/encrypted', async () => {
    const org = await createOrganisation(app.client);
    const res = await app.client.post(`/api/v1/organisations/${org.id}/projects`, {
      name: 'Shop',
      issuer: 'https://login.example.com/realms/shop',
      walletWebhookUrl: 'http://hooks.internal:8080/wallets',
    });
    expect(res.status).to.equal(201);
    expect(res.body).to.include({ organisationId: org.id, name: 'Shop', environment: 'testnet', requireVerifiedEmail: true });
    expect(res.body.projectKey).to.match(/^pk_test_[A-Za-z0-9_-]{43}$/);
    expect(res.body.walletWebhookSecret).to.match(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(required(res.body.walletWebhookSecret).slice(6), 'base64')).to.have.length(32);

    const got = await app.client.get(`/api/v1/project/${res.body.id}`);
    expect(got.status).to.equal(200);
    expect(got.body).to.have.all.keys(
      'id',
      'uid',
      'organisationId',
      'name',
      'environment',
      'issuer',
      'walletWebhookUrl',
      'requireVerifiedEmail',
      'tokenClaim',
      'audience',
      'createdAt',
      'updatedAt',
      'deletedAt',
    );
    expect(got.text).not.to.include(res.body.projectKey);
    expect(got.text).not.to.include(res.body.walletWebhookSecret);

    const stored = await row(res.body.id);
    // The identity the signer knows the project by: random (UUIDv4), drawn by the database, never changed.
    expect(got.body.uid).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(stored.uid).to.equal(got.body.uid);
    const changed = await app
      .db('projects')
      .where({ id: res.body.id })
      .update({ uid: randomUUID() })
      .catch((e: unknown) => e);
    expect(String(changed)).to.include(`the uid of project ${res.body.id} never changes`);
    expect((await row(res.body.id)).uid).to.equal(got.body.uid);
    expect(JSON.stringify(stored)).not.to.include(res.body.walletWebhookSecret);
    const box = new SecretBox(app.dataEncryptionKey);
    expect(box.open(stored.wallet_webhook_secret_enc, walletSecretAad(res.body.id))).to.equal(res.body.walletWebhookSecret);
    const keys = await app.db('project_keys').where({ project_id: res.body.id });
    expect(keys).to.have.length(1);
    expect(Buffer.compare(keys[0].key_hash, hashSecret(res.body.projectKey))).to.equal(0);
    expect(await keyProject(res.body.projectKey)).to.equal(res.body.id);
  });

  it('keeps a given wallet webhook secret without echoing it, and checks its rules', async () => {
    const org = await createOrganisation(app.client);
    const given = 'a-long-enough-shared-secret';
    const res = await app.client.post(`/api/v1/organisations/${org.id}/projects`, {
      name: 'p',
      issuer: `https://idp.example.com/org-${org.id}`,
      walletWebhookSecret: given,
    });
    expect(res.status).to.equal(201);
    expect(res.body).not.to.have.property('walletWebhookSecret');
    expect(new SecretBox(app.dataEncryptionKey).open((await row(res.body.id)).wallet_webhook_secret_enc, walletSecretAad(res.body.id))).to.equal(given);

    for (const bad of ['short', 'has spaces in the secret!', 'whsec_notbase64!!!!!!!!!!!!!!!!', `whsec_${Buffer.alloc(8).toString('base64')}`]) {
      const r = await app.client.post(`/api/v1/organisations/${org.id}/projects`, {
        name: 'p',
        issuer: `https://idp.example.com/org-${org.id}`,
        walletWebhookSecret: bad,
      });
      expect(r.status, bad).to.equal(400);
      expect(r.problem.code).to.equal('validation_failed');
    }
  });

  it('accepts only https issuers and sane webhook URLs', async () => {
    const org = await createOrganisation(app.client);
    for (const issuer of [
      'http://idp.example.com',
      'idp.example.com',
      'https://user:pw@idp.example.com',
      'https://idp.example.com?x=1',
      ' https://idp.example.com',
    ]) {
      const r = await app.client.post(`/api/v1/organisations/${org.id}/projects`, { name: 'p', issuer });
      expect(r.status, issuer).to.equal(400);
      expect(r.problem.errors?.[0]?.path).to.equal('/issuer');
    }
    for (const walletWebhookUrl of ['ftp://hooks.example.com', 'not a url', `https://x.example.com/${'a'.repeat(2050)}`]) {
      const r = await app.client.post(`/api/v1/organisations/${org.id}/projects`, {
        name: 'p',
        issuer: `https://idp.example.com/org-${org.id}`,
        walletWebhookUrl,
      });
      expect(r.status, walletWebhookUrl).to.equal(400);
    }
  });

  it('refuses plain-http webhook URLs in production', async () => {
    const prod = await startApp({
      APP_ENV: 'production',
      OPERATOR_TOKEN: 'x'.repeat(40),
      DATA_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64'),
      SERVICE_AUDIENCE: 'urn:custody:prod-test',
    });
    try {
      const org = await createOrganisation(prod.client);
      const http = await prod.client.post(`/api/v1/organisations/${org.id}/projects`, {
        name: 'p',
        issuer: `https://idp.example.com/org-${org.id}`,
        walletWebhookUrl: 'http://hooks.example.com',
      });
      expect(http.status).to.equal(400);
      const ok = await createProject(prod.client, org.id, { walletWebhookUrl: 'https://hooks.example.com' });
      expect(ok.projectKey).to.match(/^pk_live_/);
      // A production key is not a testnet key and the other way round.
      expect(await findProjectByKeyHash(prod.db, hashSecret(ok.projectKey), 'testnet')).to.equal(undefined);
      expect((await findProjectByKeyHash(prod.db, hashSecret(ok.projectKey), 'production'))?.id).to.equal(ok.id);
    } finally {
      await prod.close();
    }
  });

  it('updates only the given fields, lists with showDeleted and soft-deletes (204)', async () => {
    const org = await createOrganisation(app.client);
    const p = await createProject(app.client, org.id, { walletWebhookUrl: 'https://hooks.example.com/a' });
    const upd = await app.client.put(`/api/v1/project/${p.id}`, { requireVerifiedEmail: false, walletWebhookUrl: null });
    expect(upd.status).to.equal(200);
    expect(upd.body).to.include({ requireVerifiedEmail: false, walletWebhookUrl: null, issuer: p.issuer });
    expect((await app.client.put(`/api/v1/project/${p.id}`, {})).status).to.equal(400);

    const other = await createProject(app.client, org.id);
    expect((await app.client.delete(`/api/v1/project/${other.id}`)).status).to.equal(204);
    expect((await app.client.get(`/api/v1/project/${other.id}`)).status).to.equal(404);
    expect((await app.client.delete(`/api/v1/project/${other.id}`)).status).to.equal(404);
    expect(await keyProject(other.projectKey)).to.equal(undefined);

    const listed = async (q: '' | `?${string}`) => (await app.client.get(`/api/v1/organisations/${org.id}/projects${q}`)).body.projects.map((x) => x.id);
    expect(await listed('')).to.deep.equal([p.id]);
    expect(await listed('?showDeleted=1')).to.deep.equal([p.id, other.id]);
  });

  it('rotates the project key: the old key works during the grace period, and not at all with graceSeconds 0', async () => {
    const org = await createOrganisation(app.client);
    const p = await createProject(app.client, org.id);
    const r1 = await app.client.post(`/api/v1/project/${p.id}/keys`, { graceSeconds: 3600 });
    expect(r1.status).to.equal(200);
    expect(r1.body.projectKey).to.match(/^pk_test_/);
    expect(Date.parse(r1.body.previousKeysExpireAt)).to.be.greaterThan(Date.now() + 3500_000);
    expect(await keyProject(p.projectKey)).to.equal(p.id);
    expect(await keyProject(r1.body.projectKey)).to.equal(p.id);

    const r2 = await app.client.post(`/api/v1/project/${p.id}/keys`, { graceSeconds: 0 });
    expect(r2.status).to.equal(200);
    expect(await keyProject(p.projectKey)).to.equal(undefined);
    expect(await keyProject(r1.body.projectKey)).to.equal(undefined);
    expect(await keyProject(r2.body.projectKey)).to.equal(p.id);

    // No body means the default grace of 86400 s.
    const r3 = await app.client.post(`/api/v1/project/${p.id}/keys`);
    expect(r3.status).to.equal(200);
    expect(await keyProject(r2.body.projectKey)).to.equal(p.id);
    expect((await app.client.post(`/api/v1/project/${p.id}/keys`, { graceSeconds: -1 })).status).to.equal(400);
  });

  it('refuses keys with whitespace or of the wrong shape, never trimming', async () => {
    const org = await createOrganisation(app.client);
    const p = await createProject(app.client, org.id);
    const { projectKeyHash } = await import('../../../src/domains/projects/keys.js');
    expect(projectKeyHash(p.projectKey, 'testnet')).to.be.instanceOf(Buffer);
    expect(projectKeyHash(` ${p.projectKey}`, 'testnet')).to.equal(undefined);
    expect(projectKeyHash(`${p.projectKey}\n`, 'testnet')).to.equal(undefined);
    expect(projectKeyHash(p.projectKey, 'production')).to.equal(undefined);
  });

  it('rotates the wallet webhook secret and keeps the previous one for 24 h', async () => {
    const org = await createOrganisation(app.client);
    const p = await createProject(app.client, org.id);
    const res = await app.client.post(`/api/v1/project/${p.id}/walletWebhook/secret`);
    expect(res.status).to.equal(200);
    expect(res.body.walletWebhookSecret).to.match(/^whsec_/);
    expect(res.body.walletWebhookSecret).not.to.equal(p.walletWebhookSecret);
    const expires = Date.parse(res.body.previousSecretExpiresAt) - Date.now();
    expect(expires).to.be.within(86_300_000, 86_400_000);
    const stored = await row(p.id);
    const box = new SecretBox(app.dataEncryptionKey);
    expect(box.open(stored.wallet_webhook_secret_enc, walletSecretAad(p.id))).to.equal(res.body.walletWebhookSecret);
    expect(box.open(stored.wallet_webhook_secret_prev_enc ?? '', walletSecretAad(p.id))).to.equal(p.walletWebhookSecret);
    // A ciphertext moved to another project does not open.
    expect(() => box.open(stored.wallet_webhook_secret_enc, walletSecretAad(p.id + 1))).to.throw();
  });
});
