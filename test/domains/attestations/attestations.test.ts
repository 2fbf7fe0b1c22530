import { expect } from 'chai';
import { compactVerify, createLocalJWKSet, type JSONWebKeySet } from 'jose';
import { expireMemberships } from '../../../src/domains/memberships/expiry.js';
import { startApp, startAppWithIdp, type TestApp } from '../../support/app.js';
import { createOrganisation, createProject, createToken } from '../../support/factories.js';
import type { Client } from '../../support/http.js';
import type { TestIdp } from '../../support/idp.js';
import { freePort, until } from '../../support/wait.js';

const AUDIENCE = 'urn:custody:testnet';
const OTHER = '0x52908400098527886E0F7030069857D2E4169EE7';
const BASE = 'https://custody.example.com';

describe('membership attestations signed by the service key, verified offline against the JWKS', function () {
  this.timeout(60_000);
  let env: { app: TestApp; idp: TestIdp; close: () => Promise<void> };
  let jwks: JSONWebKeySet;

  before(async () => {
    env = await startAppWithIdp({ PUBLIC_BASE_URL: `${BASE}/`, ATTESTATION_TTL_S: '300' });
    const res = await fetch(`${env.app.url}/.well-known/jwks.json`);
    expect(res.status).to.equal(200);
    expect(res.headers.get('cache-control')).to.match(/^public, max-age=\d+$/);
    jwks = (await res.json()) as JSONWebKeySet;
  });
  after(() => env.close());

  /** A project with a signed-in user (their wallet) and a read and an admin token of the project. */
  async function setup() {
    const { app, idp } = env;
    const iss = await idp.issuer();
    const org = await createOrganisation(app.client);
    const project = await createProject(app.client, org.id, { issuer: iss.issuer });
    const userJwt = () => iss.sign({ email: 'ada@example.com' }, { audience: AUDIENCE });
    const signin = await app.client.post('/api/v1/signin', { key: project.projectKey }, { token: await userJwt() });
    expect(signin.status, signin.text).to.equal(200);
    const admin = app.client.withToken((await createToken(app.client, org.id, 'admin', project.id)).token);
    const read = app.client.withToken((await createToken(app.client, org.id, 'read', project.id)).token);
    return { project, wallet: signin.body.walletAddress, admin, read, userJwt };
  }

  const check = (c: Client, wallet: string, type = 'gym:gold') => c.get(`/api/v1/membership/check?walletAddress=${wallet}&membershipType=${type}`);
  async function verified(jws: string) {
    const { payload, protectedHeader } = await compactVerify(jws, createLocalJWKSet(jwks), { algorithms: ['ES256'] });
    return { claims: JSON.parse(Buffer.from(payload).toString('utf8')) as Record<string, unknown>, header: protectedHeader };
  }

  it('answers an active membership with a JWS (ES256) carrying iss, sub, membershipType, tokenId, status, projectId, iat and a 5-minute exp', async () => {
    const { project, wallet, admin, read } = await setup();
    const issued = await admin.post(`/api/v1/membership/issue`, [{ walletAddress: wallet, membershipType: 'gym:gold' }]);
    expect(issued.status, issued.text).to.equal(201);
    const tokenId = issued.body.memberships[0]?.tokenId;
    const res = await check(read, wallet.toLowerCase());
    expect(res.status, res.text).to.equal(200);
    expect(res.body.active).to.equal(true);
    expect(res.body.membership).to.deep.include({ tokenId, walletAddress: wallet, membershipType: 'gym:gold', status: 'active' });
    const { claims, header } = await verified(res.body.attestation ?? '');
    expect(header).to.deep.include({ alg: 'ES256', typ: 'custody-membership+jwt' });
    expect(jwks.keys.map((k) => k.kid)).to.include(header.kid);
    expect(claims).to.deep.equal({
      iss: BASE,
      sub: wallet,
      membershipType: 'gym:gold',
      tokenId,
      status: 'active',
      projectId: String(project.id),
      iat: claims['iat'],
      exp: Number(claims['iat']) + 300,
    });
    expect(Math.abs(Number(claims['iat']) - Date.now() / 1000)).to.be.below(5);
    // None of another type.
    const none = await check(read, wallet, 'gym:silver');
    expect(none.body).to.deep.equal({ active: false, membership: null, attestation: null });
  });

  it('a revoked, expired or transferred membership answers active: false and no attestation of the old holder', async () => {
    const { wallet, admin, read } = await setup();
    const nowS = Math.floor(Date.now() / 1000);
    const issued = await admin.post(`/api/v1/membership/issue`, [
      { walletAddress: wallet, membershipType: 'gym:revoked' },
      { walletAddress: wallet, membershipType: 'gym:moved', transferable: true },
      { walletAddress: wallet, membershipType: 'gym:short', expiration: nowS + 3 },
    ]);
    expect(issued.status, issued.text).to.equal(201);
    const [revoked, moved] = issued.body.memberships;
    for (const type of ['gym:revoked', 'gym:moved', 'gym:short']) expect((await check(read, wallet, type)).body.active, type).to.equal(true);

    expect((await admin.post('/api/v1/membership/revoke', { tokenId: revoked?.tokenId })).status).to.equal(200);
    expect((await check(read, wallet, 'gym:revoked')).body).to.deep.equal({ active: false, membership: null, attestation: null });

    const transferred = await admin.post('/api/v1/membership/transfer', { from: wallet, to: OTHER, tokenId: moved?.tokenId });
    expect(transferred.status, transferred.text).to.equal(200);
    expect((await check(read, wallet, 'gym:moved')).body).to.deep.equal({ active: false, membership: null, attestation: null });
    const holder = await check(read, OTHER, 'gym:moved');
    expect((await verified(holder.body.attestation ?? '')).claims).to.include({ sub: OTHER, tokenId: moved?.tokenId });

    // An attestation of a membership about to expire is never valid past the membership itself.
    const short = await check(read, wallet, 'gym:short');
    if (short.body.active) expect((await verified(short.body.attestation ?? '')).claims['exp']).to.equal(nowS + 3);
    const expired = await until('the membership to expire', async () => {
      const res = await check(read, wallet, 'gym:short');
      return !res.body.active && res;
    });
    expect(Date.now() / 1000).to.be.at.least(nowS + 3);
    expect(expired.body).to.deep.equal({ active: false, membership: null, attestation: null });
    // The worker's expiry pass, as it would run: nothing of this test is left for another suite's expiry checks.
    await expireMemberships(env.app.db, Date.now);
  });

  it('the user present checks their own wallet (JWT and project key); another wallet cannot be named', async () => {
    const { project, wallet, admin, userJwt } = await setup();
    expect((await admin.post(`/api/v1/membership/issue`, [{ walletAddress: wallet, membershipType: 'club:member' }])).status).to.equal(201);
    const res = await env.app.client.post(
      '/api/v1/wallets/membership/check',
      { key: project.projectKey, membershipType: 'club:member' },
      { token: await userJwt() },
    );
    expect(res.status, res.text).to.equal(200);
    expect(res.body.active).to.equal(true);
    expect((await verified(res.body.attestation ?? '')).claims).to.include({ sub: wallet, membershipType: 'club:member', projectId: String(project.id) });
    const named = await env.app.client.post(
      '/api/v1/wallets/membership/check',
      { key: project.projectKey, membershipType: 'club:member', walletAddress: OTHER },
      { token: await userJwt() },
    );
    expect(named.status).to.equal(400);
    const noJwt = await env.app.client.post('/api/v1/wallets/membership/check', { key: project.projectKey, membershipType: 'club:member' }, { token: null });
    expect(noJwt.status).to.equal(401);
    const noKey = await env.app.client.post('/api/v1/wallets/membership/check', { membershipType: 'club:member' }, { token: await userJwt() });
    expect(noKey.status).to.equal(400);
  });

  it('refuses bad input with 400 problem+json and changes nothing', async () => {
    const { read } = await setup();
    for (const q of [
      'walletAddress=0x1234&membershipType=gym:gold',
      `walletAddress=${OTHER}&membershipType=nocolon`,
      `walletAddress=${OTHER}`,
      'membershipType=gym:gold',
    ]) {
      const res = await read.get(`/api/v1/membership/check?${q}`);
      expect(res.status, q).to.equal(400);
      expect(res.headers.get('content-type')).to.match(/application\/problem\+json/);
    }
    const mixed = await read.get(`/api/v1/membership/check?walletAddress=0x52908400098527886e0F7030069857D2E4169EE7&membershipType=gym:gold`);
    expect(mixed.status).to.equal(400);
  });

  it('answers 503 with Retry-After when the signer cannot sign or list its keys', async () => {
    const down = await startApp({ KEYVAULT_URL: `http://127.0.0.1:${await freePort()}`, KEYVAULT_TOKEN: 'x'.repeat(40) });
    try {
      const { wallet, admin } = await setup();
      expect((await admin.post(`/api/v1/membership/issue`, [{ walletAddress: wallet, membershipType: 'gym:down' }])).status).to.equal(201);
      const jwksDown = await fetch(`${down.url}/.well-known/jwks.json`);
      expect(jwksDown.status).to.equal(503);
      expect(jwksDown.headers.get('retry-after')).to.match(/^\d+$/);
      const res = await down.client.withToken(admin.token).get(`/api/v1/membership/check?walletAddress=${wallet}&membershipType=gym:down`);
      expect(res.status).to.equal(503);
      expect(res.headers.get('retry-after')).to.match(/^\d+$/);
    } finally {
      await down.close();
    }
  });
});
