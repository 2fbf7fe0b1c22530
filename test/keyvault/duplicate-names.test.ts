import { expect } from 'chai';
import { CompactSign, exportJWK, generateKeyPair } from 'jose';
import { startApp, type TestApp } from '../support/app.js';
import { createTenant } from '../support/factories.js';
import { sharedSigner } from '../support/signer.js';

/** The signer reads every request body and every owner JWS payload with no repeated member name. */
describe('keyvault: repeated member names are refused', function () {
  this.timeout(60_000);
  let app: TestApp;
  before(async () => {
    app = await startApp();
  });
  after(() => app.close());

  it('refuses a request body that repeats a name, at any depth (400 invalid_request)', async () => {
    const signer = sharedSigner();
    const post = (path: string, raw: string) =>
      fetch(`${signer.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${signer.token}`, 'content-type': 'application/json' }, body: raw });
    for (const [path, raw] of [
      ['/v1/keys', '{"keyId":"a","keyId":"b"}'],
      ['/v1/keys', '{"purpose":"wallet","meta":{"x":1,"x":2}}'],
    ] as const) {
      const res = await post(path, raw);
      expect(res.status, raw).to.equal(400);
      const body = (await res.json()) as { code: string; message: string };
      expect(body.code).to.equal('invalid_request');
      expect(body.message).to.include('repeats the member name');
    }
  });

  it('refuses an owner JWS whose payload repeats a name, though an owner signed it', async () => {
    const t = await createTenant(app.client);
    const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
    const jwk = await exportJWK(publicKey);
    const owners = `/api/v1/project/${t.project.id}/policy/owners` as const;
    expect((await t.projectAdmin.put(owners, { keys: [{ kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y }] })).status).to.equal(201);
    // Read last-wins this names version 2 and an allow-all policy; first-wins, version 2 and none.
    const payload = `{"projectId":${JSON.stringify(String(t.project.id))},"version":2,"policy":{"rules":[]},"policy":{"rules":[{"name":"all","action":"allow","method":"personal_sign"}]}}`;
    const signed = await new CompactSign(new TextEncoder().encode(payload)).setProtectedHeader({ alg: 'ES256' }).sign(privateKey);
    const res = await t.projectAdmin.put(`/api/v1/project/${t.project.id}/policy`, { signed });
    expect([res.status, res.problem.code]).to.deep.equal([403, 'invalid_owner_signature']);
  });
});
