import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { getAddress } from 'ethers';
import { Webhook } from 'standardwebhooks';
import { startApp, type TestApp } from '../../support/app.js';
import { createOrganisation, createProject, createTenant, createToken, type Project } from '../../support/factories.js';
import { TestIdp, type TestIssuer, createCa } from '../../support/idp.js';
import { Receiver } from '../../support/receiver.js';
import { SignerClient } from '../../../src/platform/signer/client.js';
import { readDeploymentId } from '../../../src/platform/db/deployment.js';
import { testDb } from '../../support/db.js';
import { localKeyRecords, sharedSigner } from '../../support/signer.js';

const AUDIENCE = 'urn:custody:testnet';

describe('wallets: sign-in, asynchronous creation and the wallet-created webhook', function () {
  this.timeout(60_000);
  let idp: TestIdp;
  let app: TestApp;
  let caDir: string;
  let receiver: Receiver;

  before(async () => {
    idp = await TestIdp.start();
    caDir = mkdtempSync(path.join(tmpdir(), 'custody-ca-'));
    writeFileSync(path.join(caDir, 'ca.pem'), idp.caPem);
    app = await startApp(
      { OIDC_CA_FILE: path.join(caDir, 'ca.pem'), WALLET_WEBHOOK_BACKGROUND_RETRY: 'false', RELAY_POLL_MS: '100', JWKS_REFETCH_INTERVAL_MS: '0' },
      undefined,
      { relay: true },
    );
    receiver = await Receiver.start();
  });
  after(async () => {
    await app.close();
    await receiver.close();
    await idp.close();
    rmSync(caDir, { recursive: true, force: true });
  });

  /** A project registered for a fresh issuer of the test IdP. */
  async function setup(projectBody: Record<string, unknown> = {}): Promise<{ iss: TestIssuer; project: Project; org: { id: number } }> {
    const iss = await idp.issuer();
    const org = await createOrganisation(app.client);
    const project = await createProject(app.client, org.id, { issuer: iss.issuer, ...projectBody });
    return { iss, project, org };
  }
  const paths = { signin: '/api/v1/signin', createasync: '/api/v1/wallets/createasync' } as const;
  const call = <R extends keyof typeof paths>(route: R, jwt: string | null, body: Record<string, unknown>) =>
    app.client.post(paths[route], body, { token: jwt });

  it('signs a new user in (200, isNew) and returns the same wallet afterwards, whatever the e-mail case', async () => {
    const { iss, project } = await setup();
    const first = await call('signin', await iss.sign({ email: 'Ada@Example.com' }, { audience: AUDIENCE }), { key: project.projectKey });
    expect(first.status, first.text).to.equal(200);
    expect(first.body).to.have.all.keys('walletId', 'walletAddress', 'emailAddress', 'createdAt', 'isNew');
    expect(first.body).to.include({ emailAddress: 'Ada@Example.com', isNew: true });
    expect(first.body.walletId).to.be.a('number');
    expect(getAddress(first.body.walletAddress)).to.equal(first.body.walletAddress);
    const again = await call('signin', await iss.sign({ email: 'ada@example.COM' }, { audience: AUDIENCE }), { key: project.projectKey });
    expect(again.status).to.equal(200);
    expect(again.body).to.include({ walletId: first.body.walletId, walletAddress: first.body.walletAddress, isNew: false });
    // The address is the signer's key for this wallet, stored under the row's random key id.
    const signer = new SignerClient(sharedSigner().url, sharedSigner().token, 5_000, await readDeploymentId(testDb()));
    const row = await testDb()<{ id: number; key_id: string }>('wallets').where({ id: first.body.walletId }).first('key_id');
    if (!row) throw new Error('no wallet row');
    expect(row.key_id).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect((await signer.getKey(row.key_id))?.address).to.equal(first.body.walletAddress);
  });

  it("stores a new wallet's project with its key in the signer, so that the key can sign for that project only", async () => {
    const { iss, project } = await setup();
    const r = await call('signin', await iss.sign({ email: 'bound@example.com' }, { audience: AUDIENCE }), { key: project.projectKey });
    expect(r.status, r.text).to.equal(200);
    const record = localKeyRecords(sharedSigner().dataDir).find((k) => k.address === r.body.walletAddress);
    // By the project's uid: its numeric id is handed out again after a database restore.
    expect(record?.projectId).to.equal(project.uid);
  });

  it('checks in the order of section 5: body, then key (400), then Authorization and JWT (401)', async () => {
    const { iss, project } = await setup();
    const jwt = await iss.sign({}, { audience: AUDIENCE });
    const cases: Array<[string | null, unknown, number, string]> = [
      [null, {}, 400, 'missing_project_key'],
      [null, { key: 'pk_test_unknownunknownunknownunknownunknown12' }, 400, 'invalid_project_key'],
      [jwt, { key: ` ${project.projectKey}` }, 400, 'invalid_project_key'],
      [jwt, { key: `${project.projectKey}\n` }, 400, 'invalid_project_key'],
      [jwt, { key: project.projectKey.replace('pk_test_', 'pk_live_') }, 400, 'invalid_project_key'],
      [jwt, { key: project.projectKey, extra: 1 }, 400, 'validation_failed'],
      [jwt, { key: project.projectKey, token: 'a', any_other_tokens: 'b' }, 400, 'validation_failed'],
      [jwt, { key: 42 }, 400, 'validation_failed'],
      [null, { key: project.projectKey }, 401, 'missing_token'],
      ['not.a.jwt', { key: project.projectKey }, 401, 'invalid_token'],
    ];
    for (const route of ['signin', 'createasync'] as const) {
      for (const [token, body, status, code] of cases) {
        const res = await call(route, token, body as Record<string, unknown>);
        expect(res.status, `${route} ${JSON.stringify(body)}`).to.equal(status);
        expect(res.problem.code).to.equal(code);
        expect(res.headers.get('content-type')).to.equal('application/problem+json');
      }
      const wrongType = await app.client.request('POST', route === 'signin' ? '/api/v1/signin' : '/api/v1/wallets/createasync', {
        raw: JSON.stringify({ key: project.projectKey }),
        contentType: 'text/plain',
        token: jwt,
      });
      expect(wrongType.status).to.equal(400);
      const malformed = await app.client.request('POST', '/api/v1/signin', { raw: '{"key":', token: jwt });
      expect(malformed.problem.code).to.equal('malformed_json');
    }
  });

  it('answers 401 for each failed JWT check, naming it, through the sign-in endpoint', async () => {
    const { iss, project } = await setup();
    const key = { key: project.projectKey };
    const expectCheck = async (jwt: string, detail: RegExp) => {
      const res = await call('signin', jwt, key);
      expect(res.status, res.text).to.equal(401);
      expect(res.problem.code).to.equal('invalid_token');
      expect(res.problem.detail).to.match(detail);
    };
    await expectCheck(await iss.sign({ iss: 'https://other.example.com' }, { audience: AUDIENCE }), /^iss:/);
    await expectCheck(await iss.sign({}, { audience: 'urn:someone-else' }), /^aud:/);
    await expectCheck(await iss.sign({}, { audience: AUDIENCE, expiresIn: Math.floor(Date.now() / 1000) - 600 }), /^exp:/);
    await expectCheck(await iss.sign({ email: undefined }, { audience: AUDIENCE }), /^email:/);
    const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
    await expectCheck(`${b64({ alg: 'none' })}.${b64({ iss: iss.issuer, aud: AUDIENCE, exp: 9_999_999_999, email: 'x@example.com' })}.`, /^alg:/);
    await expectCheck(
      `${b64({ alg: 'HS256', kid: iss.keys[0]!.kid })}.${b64({ iss: iss.issuer, aud: AUDIENCE, exp: 9_999_999_999, email: 'x@example.com' })}.c2ln`,
      /^alg:/,
    );
    await expectCheck(await iss.sign({ email_verified: false }, { audience: AUDIENCE }), /^email_verified:/);

    // Unknown kid, then the IdP rotates: one re-fetch finds the new key.
    const rotated = await setup({ requireVerifiedEmail: false });
    expect((await call('signin', await rotated.iss.sign({}, { audience: AUDIENCE }), { key: rotated.project.projectKey })).status).to.equal(200);
    const newKey = await rotated.iss.rotate();
    const after = await call('signin', await rotated.iss.sign({ email: 'second@example.com' }, { audience: AUDIENCE, key: newKey }), {
      key: rotated.project.projectKey,
    });
    expect(after.status, after.text).to.equal(200);

    const notArray = await setup();
    notArray.iss.jwks = { keys: 'nope' };
    await (async () => {
      const res = await call('signin', await notArray.iss.sign({}, { audience: AUDIENCE }), { key: notArray.project.projectKey });
      expect(res.status).to.equal(401);
      expect(res.problem.detail).to.match(/"keys" is not an array/);
    })();

    const unreachable = await setup();
    unreachable.iss.status = 500;
    const down = await call('signin', await unreachable.iss.sign({}, { audience: AUDIENCE }), { key: unreachable.project.projectKey });
    expect(down.status).to.equal(401);
    expect(down.problem.detail).to.match(/^discovery document/);

    const mismatch = await setup();
    mismatch.iss.discovery = { issuer: 'https://elsewhere.example.com', jwks_uri: `${mismatch.iss.issuer}/.well-known/jwks.json` };
    const mm = await call('signin', await mismatch.iss.sign({}, { audience: AUDIENCE }), { key: mismatch.project.projectKey });
    expect(mm.status).to.equal(401);
    expect(mm.problem.detail).to.match(/issuer does not equal/);

    const untrusted = await TestIdp.start(await createCa('not trusted'));
    try {
      const otherIss = await untrusted.issuer();
      const org = await createOrganisation(app.client);
      const p = await createProject(app.client, org.id, { issuer: otherIss.issuer });
      const res = await call('signin', await otherIss.sign({}, { audience: AUDIENCE }), { key: p.projectKey });
      expect(res.status).to.equal(401);
      expect(res.problem.detail).to.match(/tls/);
    } finally {
      await untrusted.close();
    }

    const org = await createOrganisation(app.client);
    const plain = await app.client.post(`/api/v1/organisations/${org.id}/projects`, { name: 'p', issuer: 'http://idp.example.com' });
    expect(plain.status).to.equal(400);
  });

  it('ends 50 simultaneous sign-ins for one new identity with one wallet and exactly one isNew', async () => {
    const { iss, project } = await setup();
    const jwt = await iss.sign({ email: 'crowd@example.com' }, { audience: AUDIENCE });
    const answers = await Promise.all(Array.from({ length: 50 }, () => call('signin', jwt, { key: project.projectKey })));
    expect(
      answers.every((a) => a.status === 200),
      answers.map((a) => a.status).join(','),
    ).to.equal(true);
    expect(new Set(answers.map((a) => a.body.walletId)).size).to.equal(1);
    expect(answers.filter((a) => a.body.isNew === true)).to.have.length(1);
    expect(await app.db('wallets').where({ project_id: project.id })).to.have.length(1);
  });

  it('ends 50 simultaneous mixed signin/createasync calls with one wallet, at most one isNew, no 5xx', async () => {
    const { iss, project } = await setup();
    const jwt = await iss.sign({ email: 'mixed@example.com' }, { audience: AUDIENCE });
    // Started alternately, as one burst.
    const started = Array.from(
      { length: 25 },
      () => [call('signin', jwt, { key: project.projectKey }), call('createasync', jwt, { key: project.projectKey })] as const,
    );
    const [signins, accepted] = await Promise.all([Promise.all(started.map(([s]) => s)), Promise.all(started.map(([, c]) => c))]);
    expect([...signins, ...accepted].filter((a) => a.status >= 500)).to.have.length(0);
    expect(signins.every((a) => a.status === 200)).to.equal(true);
    expect(accepted.every((a) => a.status === 202 && a.body.status === 'accepted')).to.equal(true);
    expect(new Set(signins.map((a) => a.body.walletId)).size).to.equal(1);
    expect(signins.filter((a) => a.body.isNew === true).length).to.be.at.most(1);
    expect(await app.db('wallets').where({ project_id: project.id })).to.have.length(1);
  });

  it('creates asynchronously (202) and delivers the signed wallet-created webhook, verifiable with standardwebhooks', async () => {
    receiver.status = 204;
    const before = receiver.received.length;
    const { iss, project } = await setup({ walletWebhookUrl: receiver.url });
    const res = await call('createasync', await iss.sign({ email: 'async@example.com' }, { audience: AUDIENCE }), {
      key: project.projectKey,
      token: 'corr-42',
    });
    expect(res.status).to.equal(202);
    expect(res.body).to.deep.equal({ status: 'accepted' });
    const [delivery] = (await receiver.waitFor(before + 1)).slice(before);
    const wh = new Webhook(project.walletWebhookSecret!);
    const verified = wh.verify(delivery!.body, delivery!.headers as Record<string, string>) as Record<string, unknown>;
    const wallet = await app.db('wallets').where({ project_id: project.id }).first();
    expect(verified).to.deep.equal({ walletId: wallet.id, walletAddress: wallet.address, emailAddress: 'async@example.com', token: 'corr-42' });
    expect(Object.keys(JSON.parse(delivery!.body))).to.deep.equal(['walletId', 'walletAddress', 'emailAddress', 'token']);
    expect(delivery!.headers['content-type']).to.equal('application/json');
    // The same creation recorded a wallet.created event for subscriptions.
    const events = await app.db('outbox').where({ project_id: project.id, kind: 'event', event: 'wallet.created' });
    expect(events).to.have.length(1);
    expect(JSON.parse(events[0].payload)[0]).to.deep.include({ type: 'wallet.created', projectId: project.id });
  });

  it('lists a failed wallet delivery and re-sends it at the next sign-in; a success clears it', async () => {
    receiver.status = 500;
    const before = receiver.received.length;
    const { iss, project } = await setup({ walletWebhookUrl: receiver.url });
    const jwt = await iss.sign({ email: 'unlucky@example.com' }, { audience: AUDIENCE });
    const first = await call('signin', jwt, { key: project.projectKey });
    expect(first.body.isNew).to.equal(true);
    await receiver.waitFor(before + 1);
    let failed: { body: { failedDeliveries: Array<Record<string, unknown>> } } | undefined;
    for (let i = 0; i < 50; i++) {
      failed = await app.client.get(`/api/v1/project/${project.id}/webhooks/failedDeliveries`);
      if (failed.body.failedDeliveries.length > 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const [record] = failed!.body.failedDeliveries;
    expect(record).to.include({
      kind: 'wallet',
      webhookId: null,
      event: 'wallet.created',
      url: receiver.url,
      attempts: 1,
      lastStatus: 500,
      lastError: 'http_status',
      lastResponseBody: 'receiver says no',
    });
    expect(record!['payload']).to.deep.include({ walletId: first.body.walletId, emailAddress: 'unlucky@example.com' });
    const firstId = receiver.received[before]!.headers['webhook-id'];

    receiver.status = 200;
    const again = await call('signin', jwt, { key: project.projectKey });
    expect(again.status).to.equal(200);
    const resent = (await receiver.waitFor(before + 2))[before + 1]!;
    expect(resent.headers['webhook-id']).to.equal(firstId);
    new Webhook(project.walletWebhookSecret!).verify(resent.body, resent.headers as Record<string, string>);
    for (let i = 0; i < 50; i++) {
      const list = await app.client.get(`/api/v1/project/${project.id}/webhooks/failedDeliveries`);
      if (list.body.failedDeliveries.length === 0) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect.fail('the delivered webhook is still listed as failed');
  });

  it('signs with both secrets during a wallet webhook secret rotation', async () => {
    receiver.status = 204;
    const before = receiver.received.length;
    const { iss, project } = await setup({ walletWebhookUrl: receiver.url });
    const rotated = await app.client.post(`/api/v1/project/${project.id}/walletWebhook/secret`);
    await call('signin', await iss.sign({ email: 'rotation@example.com' }, { audience: AUDIENCE }), { key: project.projectKey });
    const delivery = (await receiver.waitFor(before + 1))[before]!;
    expect(String(delivery.headers['webhook-signature']).split(' ')).to.have.length(2);
    new Webhook(project.walletWebhookSecret!).verify(delivery.body, delivery.headers as Record<string, string>);
    new Webhook(rotated.body.walletWebhookSecret).verify(delivery.body, delivery.headers as Record<string, string>);
  });

  it('looks wallets up for API tokens by e-mail, address and id, within the tenant', async () => {
    const { iss, project, org } = await setup();
    const w = (await call('signin', await iss.sign({ email: 'Look@Example.com' }, { audience: AUDIENCE }), { key: project.projectKey })).body;
    const byEmail = await app.client.get(`/api/v1/project/${project.id}/wallets?email=look%40example.com`);
    expect(byEmail.body.wallets.map((x: { walletId: number }) => x.walletId)).to.deep.equal([w.walletId]);
    const byAddress = await app.client.get(`/api/v1/project/${project.id}/wallets?address=${String(w.walletAddress).toLowerCase()}`);
    expect(byAddress.body.wallets).to.have.length(1);
    expect((await app.client.get(`/api/v1/project/${project.id}/wallets/${w.walletId}`)).body.walletAddress).to.equal(w.walletAddress);
    const other = await createTenant(app.client);
    expect((await other.orgAdmin.get(`/api/v1/project/${project.id}/wallets/${w.walletId}`)).status).to.equal(404);
    expect((await other.orgAdmin.get(`/api/v1/project/${project.id}/wallets`)).status).to.equal(404);
    expect((await app.client.get(`/api/v1/project/${other.project.id}/wallets/${w.walletId}`)).status).to.equal(404);
    void org;
  });
});

describe('wallets: issuer check, SSRF and dependency failures', function () {
  this.timeout(60_000);
  let idp: TestIdp;
  let caDir: string;
  before(async () => {
    idp = await TestIdp.start();
    caDir = mkdtempSync(path.join(tmpdir(), 'custody-ca-'));
    writeFileSync(path.join(caDir, 'ca.pem'), idp.caPem);
  });
  after(async () => {
    await idp.close();
    rmSync(caDir, { recursive: true, force: true });
  });

  it('reports every JWT check for a sample token without creating anything', async () => {
    const app = await startApp({ OIDC_CA_FILE: path.join(caDir, 'ca.pem') });
    try {
      const iss = await idp.issuer();
      const org = await createOrganisation(app.client);
      const project = await createProject(app.client, org.id, { issuer: iss.issuer });
      const good = await app.client.post(`/api/v1/project/${project.id}/issuer/check`, { token: await iss.sign({}, { audience: AUDIENCE }) });
      expect(good.status).to.equal(200);
      expect(good.body.ok).to.equal(true);
      expect(good.body.checks.map((c: { name: string }) => c.name)).to.deep.equal([
        'discovery',
        'jwks',
        'alg',
        'kid',
        'signature',
        'iss',
        'aud',
        'exp',
        'email',
        'email_verified',
      ]);
      const bad = await app.client.post(`/api/v1/project/${project.id}/issuer/check`, {
        token: await iss.sign({ email: undefined }, { audience: 'urn:wrong', expiresIn: Math.floor(Date.now() / 1000) - 3600 }),
      });
      expect(bad.body.ok).to.equal(false);
      const outcome = Object.fromEntries(bad.body.checks.map((c: { name: string; outcome: string }) => [c.name, c.outcome]));
      expect(outcome).to.include({ discovery: 'passed', signature: 'passed', aud: 'failed', exp: 'failed', email: 'failed', iss: 'passed' });
      expect(await app.db('wallets').where({ project_id: project.id })).to.have.length(0);
      const t = await createTenant(app.client);
      expect((await t.orgAdmin.post(`/api/v1/project/${project.id}/issuer/check`, { token: 'x' })).status).to.equal(404);
    } finally {
      await app.close();
    }
  });

  it('refuses a wallet webhook to a private address at creation, and at connect time (ssrf_blocked) where another process allowed it', async () => {
    // Another loopback address than the IdP's: only the IdP's is allowed.
    const receiver = await Receiver.start('127.0.0.2');
    const env = {
      APP_ENV: 'production',
      OPERATOR_TOKEN: 'o'.repeat(40),
      DATA_ENCRYPTION_KEY: Buffer.alloc(32, 3).toString('base64'),
      SERVICE_AUDIENCE: AUDIENCE,
      OIDC_CA_FILE: path.join(caDir, 'ca.pem'),
      EGRESS_ALLOW_PRIVATE: '127.0.0.1/32',
      WALLET_WEBHOOK_BACKGROUND_RETRY: 'false',
      RELAY_POLL_MS: '100',
    };
    const app = await startApp(env, undefined, { relay: true });
    // A process of the same deployment with a wider EGRESS_ALLOW_PRIVATE (a configuration changed since).
    const allowing = await startApp({ ...env, EGRESS_ALLOW_PRIVATE: '127.0.0.0/8' });
    try {
      const iss = await idp.issuer();
      const org = await createOrganisation(app.client);
      // https is required in production.
      const walletWebhookUrl = receiver.url.replace('http://', 'https://');
      const refused = await app.client.post(`/api/v1/organisations/${org.id}/projects`, { name: 'p', issuer: iss.issuer, walletWebhookUrl });
      expect(refused.status, refused.text).to.equal(400);
      expect(refused.problem.errors?.[0]).to.include({ path: '/walletWebhookUrl', message: 'points to 127.0.0.2, which is not a public address' });
      const token = await createToken(app.client, org.id, 'admin');
      const project = await createProject(allowing.client.withToken(token.token), org.id, { issuer: iss.issuer, walletWebhookUrl });
      const res = await app.client.post('/api/v1/signin', { key: project.projectKey }, { token: await iss.sign({}, { audience: AUDIENCE }) });
      expect(res.status, res.text).to.equal(200);
      let record: Record<string, unknown> | undefined;
      for (let i = 0; i < 100 && !record; i++) {
        record = (await app.client.get(`/api/v1/project/${project.id}/webhooks/failedDeliveries`)).body.failedDeliveries[0];
        if (!record) await new Promise((r) => setTimeout(r, 100));
      }
      expect(record).to.include({ kind: 'wallet', lastError: 'ssrf_blocked', lastStatus: null });
      expect(receiver.received).to.have.length(0);
    } finally {
      await allowing.close();
      await app.close();
      await receiver.close();
    }
  });

  it('marks a wallet webhook failed at once on a refused connection or a timeout, classified', async () => {
    const hang = createNetServer(() => undefined);
    await new Promise<void>((resolve) => hang.listen(0, '127.0.0.1', resolve));
    const hangPort = (hang.address() as AddressInfo).port;
    const app = await startApp(
      { OIDC_CA_FILE: path.join(caDir, 'ca.pem'), WEBHOOK_TIMEOUT_MS: '500', WALLET_WEBHOOK_BACKGROUND_RETRY: 'false', RELAY_POLL_MS: '100' },
      undefined,
      { relay: true },
    );
    try {
      const cases: Array<[string, string]> = [
        ['http://127.0.0.1:9/refused', 'connection'],
        [`http://127.0.0.1:${hangPort}/hangs`, 'timeout'],
      ];
      for (const [url, lastError] of cases) {
        const iss = await idp.issuer();
        const org = await createOrganisation(app.client);
        const project = await createProject(app.client, org.id, { issuer: iss.issuer, walletWebhookUrl: url });
        expect((await app.client.post('/api/v1/signin', { key: project.projectKey }, { token: await iss.sign({}, { audience: AUDIENCE }) })).status).to.equal(
          200,
        );
        let record: Record<string, unknown> | undefined;
        for (let i = 0; i < 100 && !record; i++) {
          record = (await app.client.get(`/api/v1/project/${project.id}/webhooks/failedDeliveries`)).body.failedDeliveries[0];
          if (!record) await new Promise((r) => setTimeout(r, 100));
        }
        expect(record, url).to.include({ kind: 'wallet', attempts: 1, lastError, lastStatus: null, url });
      }
    } finally {
      await app.close();
      hang.close();
    }
  });

  it('retries a failed wallet webhook in the background on the configured schedule', async () => {
    const receiver = await Receiver.start();
    receiver.status = 503;
    const app = await startApp({ OIDC_CA_FILE: path.join(caDir, 'ca.pem'), WEBHOOK_RETRY_SCHEDULE: '0,300,300,300', RELAY_POLL_MS: '50' }, undefined, {
      relay: true,
    });
    try {
      const iss = await idp.issuer();
      const org = await createOrganisation(app.client);
      const project = await createProject(app.client, org.id, { issuer: iss.issuer, walletWebhookUrl: receiver.url });
      expect((await app.client.post('/api/v1/signin', { key: project.projectKey }, { token: await iss.sign({}, { audience: AUDIENCE }) })).status).to.equal(
        200,
      );
      await receiver.waitFor(2);
      receiver.status = 200;
      const got = await receiver.waitFor(3);
      expect(new Set(got.map((r) => r.headers['webhook-id'])).size).to.equal(1);
      for (let i = 0; i < 50; i++) {
        if ((await app.client.get(`/api/v1/project/${project.id}/webhooks/failedDeliveries`)).body.failedDeliveries.length === 0) return;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect.fail('the delivered webhook is still listed as failed');
    } finally {
      await app.close();
      await receiver.close();
    }
  });

  it('answers 503 with Retry-After when the signer is down, and the next sign-in completes the same wallet', async () => {
    const app = await startApp({ OIDC_CA_FILE: path.join(caDir, 'ca.pem'), KEYVAULT_URL: 'http://127.0.0.1:9', KEYVAULT_TIMEOUT_MS: '2000' });
    const iss = await idp.issuer();
    const jwt = await iss.sign({ email: 'patient@example.com' }, { audience: AUDIENCE });
    const org = await createOrganisation(app.client);
    const { projectKey } = await createProject(app.client, org.id, { issuer: iss.issuer });
    try {
      const res = await app.client.post('/api/v1/signin', { key: projectKey }, { token: jwt });
      expect(res.status).to.equal(503);
      expect(res.headers.get('retry-after')).to.match(/^\d+$/);
      expect(res.problem.code).to.equal('dependency_unavailable');
    } finally {
      await app.close();
    }
    const healthy = await startApp({ OIDC_CA_FILE: path.join(caDir, 'ca.pem') });
    try {
      const res = await healthy.client.post('/api/v1/signin', { key: projectKey }, { token: jwt });
      expect(res.status).to.equal(200);
      expect(res.body.isNew).to.equal(true);
    } finally {
      await healthy.close();
    }
  });
});
