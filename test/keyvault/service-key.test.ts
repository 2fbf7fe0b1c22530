import { statSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { compactVerify, createLocalJWKSet, decodeProtectedHeader } from 'jose';
import { startSigner, type RunningSigner } from '../support/signer.js';

async function call(s: RunningSigner, method: string, p: string, body?: unknown, token: string | null = s.token) {
  const headers: Record<string, string> = {};
  if (token !== null) headers['authorization'] = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${s.url}${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const now = Math.floor(Date.now() / 1000);
const attestation = {
  iss: 'https://custody.example.com',
  sub: '0x52908400098527886E0F7030069857D2E4169EE7',
  membershipType: 'gym:gold',
  tokenId: '7',
  status: 'active',
  projectId: '3',
  iat: now,
  exp: now + 300,
};
const checkpoint = { size: 12, head: 'ab'.repeat(32), time: new Date().toISOString() };

describe('keyvault: the service key (local backend)', function () {
  this.timeout(60_000);
  let signer: RunningSigner;
  before(async () => {
    signer = await startSigner();
  });
  after(() => signer.destroy());

  it('signs each fixed purpose as a compact ES256 JWS it builds itself, verified offline against its public keys', async () => {
    const keys = await call(signer, 'GET', '/v1/service/keys');
    expect(keys.status).to.equal(200);
    const jwks = keys.body as { keys: Array<Record<string, unknown>> };
    expect(jwks.keys).to.have.length(1);
    expect(jwks.keys[0]).to.include({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' });
    expect(jwks.keys[0]).to.not.have.property('d');
    for (const [purpose, payload, typ] of [
      ['membership-attestation', attestation, 'custody-membership+jwt'],
      ['audit-checkpoint', checkpoint, 'custody-audit-checkpoint+jwt'],
    ] as const) {
      const res = await call(signer, 'POST', '/v1/service/sign', { purpose, payload });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      const jws = String(res.body['jws']);
      const { payload: signed, protectedHeader } = await compactVerify(jws, createLocalJWKSet(jwks as never), { algorithms: ['ES256'] });
      expect(protectedHeader).to.deep.equal({ alg: 'ES256', kid: jwks.keys[0]?.['kid'], typ });
      expect(JSON.parse(Buffer.from(signed).toString('utf8'))).to.deep.equal(payload);
      expect(res.body['kid']).to.equal(jwks.keys[0]?.['kid']);
    }
  });

  it('takes no caller-chosen bytes: an unknown purpose, extra or missing fields, wrong types, a revoked status are refused (400)', async () => {
    const refused = [
      { purpose: 'anything', payload: checkpoint },
      { purpose: 'audit-checkpoint', payload: { ...checkpoint, extra: 'x' } },
      { purpose: 'audit-checkpoint', payload: { size: 1, head: 'ab'.repeat(32) } },
      { purpose: 'audit-checkpoint', payload: { ...checkpoint, head: 'not hex' } },
      { purpose: 'audit-checkpoint', payload: { ...checkpoint, size: -1 } },
      { purpose: 'audit-checkpoint', payload: 'eyJhbGciOiJFUzI1NiJ9.e30' },
      { purpose: 'membership-attestation', payload: { ...attestation, status: 'revoked' } },
      { purpose: 'membership-attestation', payload: { ...attestation, exp: attestation.iat } },
      { purpose: 'membership-attestation', payload: { ...attestation, sub: 7 } },
      { purpose: 'membership-attestation', payload: attestation, signingInput: 'abc' },
    ];
    for (const body of refused) {
      const res = await call(signer, 'POST', '/v1/service/sign', body);
      expect(res.status, JSON.stringify(body)).to.equal(400);
      expect(res.body['code']).to.equal('invalid_request');
    }
    expect((await call(signer, 'POST', '/v1/service/sign', { purpose: 'audit-checkpoint', payload: checkpoint }, null)).status).to.equal(401);
    expect((await call(signer, 'GET', '/v1/service/keys', undefined, null)).status).to.equal(401);
  });

  it('keeps its P-256 key in a 0600 file of the data directory: the same key after a restart', async () => {
    const before = (await call(signer, 'GET', '/v1/service/keys')).body;
    expect(statSync(path.join(signer.dataDir, 'service-key.pem')).mode & 0o777).to.equal(0o600);
    await signer.stop();
    signer = await startSigner({}, { dataDir: signer.dataDir, token: signer.token });
    expect((await call(signer, 'GET', '/v1/service/keys')).body).to.deep.equal(before);
    const res = await call(signer, 'POST', '/v1/service/sign', { purpose: 'audit-checkpoint', payload: checkpoint });
    expect(decodeProtectedHeader(String(res.body['jws'])).kid).to.equal((before as { keys: Array<{ kid: string }> }).keys[0]?.kid);
  });
});
