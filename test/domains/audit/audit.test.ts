import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { getAddress } from 'ethers';
import { startApp, type TestApp } from '../../support/app.js';
import { createTenant } from '../../support/factories.js';
import { required, type Reply } from '../../support/http.js';
import { TestIdp } from '../../support/idp.js';

describe('audit log of management writes and key creations', () => {
  let app: TestApp;
  let idp: TestIdp;
  let caDir: string;

  before(async () => {
    idp = await TestIdp.start();
    caDir = mkdtempSync(path.join(tmpdir(), 'custody-audit-'));
    writeFileSync(path.join(caDir, 'ca.pem'), idp.caPem);
    app = await startApp({ OIDC_CA_FILE: path.join(caDir, 'ca.pem') });
  });
  after(async () => {
    await app.close();
    await idp.close();
    rmSync(caDir, { recursive: true, force: true });
  });

  it('records who did what, when and under which request id, for every write, in the transaction of the change; never a secret', async () => {
    const t = await createTenant(app.client);
    const org = t.org.id;
    const pid = t.project.id;
    const done: Array<{ action: string; res: Reply<unknown>; actor: string }> = [];
    const write = async <T>(actor: string, action: string, call: Promise<Reply<T>>): Promise<Reply<T>> => {
      const res = await call;
      expect(res.status, `${action}: ${res.text}`).to.be.below(300);
      done.push({ action, res, actor });
      return res;
    };
    const orgAdmin = `token:${t.tokens.orgAdmin.id}`;
    const projectAdmin = `token:${t.tokens.projectAdmin.id}`;

    await write(orgAdmin, 'PUT /api/v1/organisations/:id', t.orgAdmin.put(`/api/v1/organisations/${org}`, { name: 'Renamed' }));
    const project = await write(
      orgAdmin,
      'POST /api/v1/organisations/:id/projects',
      t.orgAdmin.post(`/api/v1/organisations/${org}/projects`, { name: 'second', issuer: `https://idp.example.com/org-${org}` }),
    );
    const keys = await write(orgAdmin, 'POST /api/v1/project/:projectId/keys', t.orgAdmin.post(`/api/v1/project/${pid}/keys`, { graceSeconds: 0 }));
    const secret = await write(
      orgAdmin,
      'POST /api/v1/project/:projectId/walletWebhook/secret',
      t.orgAdmin.post(`/api/v1/project/${pid}/walletWebhook/secret`),
    );
    const token = await write(
      orgAdmin,
      'POST /api/v1/organisations/:id/tokens',
      t.orgAdmin.post(`/api/v1/organisations/${org}/tokens`, { name: 'ci', role: 'read' }),
    );
    await write(orgAdmin, 'DELETE /api/v1/organisations/:id/tokens/:tokenId', t.orgAdmin.delete(`/api/v1/organisations/${org}/tokens/${token.body.id}`));
    const issued = await write(
      projectAdmin,
      'POST /api/v1/membership/issue',
      t.projectAdmin.post('/api/v1/membership/issue', [{ membershipType: 'gym:gold', walletAddress: getAddress(`0x${'12'.repeat(20)}`) }]),
    );
    await write(
      projectAdmin,
      'POST /api/v1/membership/revoke',
      t.projectAdmin.post('/api/v1/membership/revoke', { tokenId: issued.body.memberships[0]!.tokenId }),
    );
    const hook = await write(
      projectAdmin,
      'POST /api/v1/project/:projectId/webhooks',
      t.projectAdmin.post(`/api/v1/project/${pid}/webhooks`, { url: 'https://hooks.example.com/in', events: ['*'] }),
    );
    const rotated = await write(
      projectAdmin,
      'POST /api/v1/project/:projectId/webhooks/:webhookId/secret',
      t.projectAdmin.post(`/api/v1/project/${pid}/webhooks/${hook.body.id}/secret`),
    );
    await write('operator', 'DELETE /api/v1/project/:projectId', app.client.delete(`/api/v1/project/${project.body.id}`));

    // Refused writes leave no entry.
    expect((await t.projectRead.post('/api/v1/membership/issue', [])).status).to.equal(400);
    expect((await t.orgRead.put(`/api/v1/organisations/${org}`, { name: 'nope' })).status).to.equal(403);

    const log = await t.orgAdmin.get(`/api/v1/organisations/${org}/audit?limit=1000`);
    expect(log.status).to.equal(200);
    const entries = log.body.entries;
    // The tenant's own setup (project and tokens by the operator) comes first.
    const mine = entries.slice(-done.length);
    expect(mine.map((e) => e.action)).to.deep.equal(done.map((d) => d.action));
    mine.forEach((e, i) => {
      const d = done[i];
      expect(e.actor, e.action).to.equal(d?.actor);
      expect(e.requestId, e.action).to.equal(d?.res.headers.get('x-request-id'));
      expect(e.organisationId, e.action).to.equal(org);
      expect(Date.parse(e.at)).to.be.closeTo(Date.now(), 60_000);
    });
    expect(mine.find((e) => e.action === 'POST /api/v1/membership/issue')?.projectId).to.equal(pid);
    expect(mine.find((e) => e.action === 'POST /api/v1/organisations/:id/tokens')?.target).to.equal(String(token.body.id));

    const everything = JSON.stringify((await app.db('audit_log')).map((r: unknown) => r));
    for (const secretValue of [
      t.project.projectKey,
      project.body.projectKey,
      keys.body.projectKey,
      secret.body.walletWebhookSecret,
      token.body.token,
      hook.body.secret,
      rotated.body.secret,
      t.tokens.orgAdmin.token,
    ]) {
      expect(secretValue).to.be.a('string');
      expect(everything).not.to.include(secretValue);
    }
  });

  it('records each key creation, with the request that caused it', async () => {
    const iss = await idp.issuer();
    const t = await createTenant(app.client);
    await app.client.put(`/api/v1/project/${t.project.id}`, { issuer: iss.issuer });
    const jwt = await iss.sign({ email: 'audited@example.com' }, { audience: 'urn:custody:testnet' });
    const res = await app.client.withToken(jwt).post('/api/v1/signin', { key: t.project.projectKey });
    expect(res.status, res.text).to.equal(200);
    const again = await app.client.withToken(jwt).post('/api/v1/signin', { key: t.project.projectKey });
    expect(again.status).to.equal(200);
    const entries = (await t.orgAdmin.get(`/api/v1/organisations/${t.org.id}/audit`)).body.entries;
    const created = entries.filter((e) => e.action === 'wallet.key_created');
    expect(created).to.have.length(1);
    expect(created[0]).to.include({
      actor: `project:${t.project.id}`,
      projectId: t.project.id,
      requestId: res.headers.get('x-request-id'),
      target: `wallet:${res.body.walletId}`,
    });
    expect(created[0]?.details).to.include({ walletAddress: res.body.walletAddress });
  });

  it('is for the operator and organisation admins: read tokens 403, project tokens and other tenants 404', async () => {
    const [t, other] = await Promise.all([createTenant(app.client), createTenant(app.client)]);
    const url = `/api/v1/organisations/${t.org.id}/audit` as const;
    expect((await app.client.get(url)).status).to.equal(200);
    expect((await t.orgAdmin.get(url)).status).to.equal(200);
    expect((await t.orgRead.get(url)).status).to.equal(403);
    expect((await t.projectAdmin.get(url)).status).to.equal(404);
    expect((await other.orgAdmin.get(url)).status).to.equal(404);
    const page = await app.client.get(`${url}?limit=2`);
    expect(page.body.entries).to.have.length(2);
    const next = await app.client.get(`${url}?limit=2&cursor=${page.body.nextCursor}`);
    expect(next.body.entries[0]?.id).to.be.greaterThan(required(page.body.entries[1]).id);
    expect((await app.client.get(`${url}?cursor=forged`)).status).to.equal(400);
  });
});
