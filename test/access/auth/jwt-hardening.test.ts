import { webcrypto } from 'node:crypto';
import { expect } from 'chai';
import { InvalidTokenError, OidcVerifier, uniqueTopLevelNames, type OidcOptions } from '../../../src/access/auth/oidc.js';
import { startApp, type TestApp } from '../../support/app.js';
import { createOrganisation, createProject } from '../../support/factories.js';
import { TestIdp, type TestIssuer } from '../../support/idp.js';

const AUDIENCE = 'urn:custody:test';
const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64url');

/** Signs exactly these header and payload texts (duplicates, odd kids and all) with the issuer's key. */
async function signRaw(iss: TestIssuer, header: string, payload: string): Promise<string> {
  const key = iss.keys[iss.keys.length - 1];
  if (!key) throw new Error('no key');
  const input = `${b64(header)}.${b64(payload)}`;
  const signature = await webcrypto.subtle.sign({ name: 'RSASSA-PKCS1-v1_5' }, key.privateKey, Buffer.from(input));
  return `${input}.${Buffer.from(signature).toString('base64url')}`;
}

describe('JWT hardening (beyond the wallet issue)', function () {
  this.timeout(60_000);
  let idp: TestIdp;
  const options = (): OidcOptions => ({
    audience: AUDIENCE,
    clockToleranceS: 30,
    cacheTtlS: 600,
    maxIssuers: 100,
    refetchIntervalMs: 60_000,
    fetchTimeoutMs: 2_000,
    egress: { allow: ['127.0.0.0/8', '::1/128'] },
    extraCa: idp.caPem,
  });
  const project = (iss: TestIssuer) => ({ issuer: iss.issuer, requireVerifiedEmail: true });
  const claims = (iss: TestIssuer, extra = '') =>
    `{"iss":"${iss.issuer}","aud":"${AUDIENCE}","sub":"u1","exp":${Math.floor(Date.now() / 1000) + 300},"email":"a@example.com"${extra}}`;

  async function rejects(promise: Promise<unknown>, detail: RegExp): Promise<void> {
    try {
      await promise;
    } catch (err) {
      expect(err, String(err)).to.be.instanceOf(InvalidTokenError);
      expect((err as InvalidTokenError).status).to.equal(401);
      expect((err as InvalidTokenError).detail).to.match(detail);
      return;
    }
    expect.fail(`expected a 401 matching ${String(detail)}`);
  }

  before(async () => {
    idp = await TestIdp.start();
  });
  after(() => idp.close());

  it('accepts a hand-signed token (the signing helper itself is sound)', async () => {
    const iss = await idp.issuer();
    const token = await signRaw(iss, `{"alg":"RS256","kid":"${iss.keys[0]?.kid}"}`, claims(iss));
    const user = await new OidcVerifier(options()).verify(token, project(iss));
    expect(user.email).to.equal('a@example.com');
  });

  it('kid injection strings never match a key, and cost at most one rate-limited key-set re-fetch', async () => {
    const iss = await idp.issuer();
    const verifier = new OidcVerifier(options());
    const plausible = ['../../../../etc/passwd', "' OR '1'='1' --", '${jndi:ldap://evil/x}', '..%2f..%2fjwks', '*', 'k1;DROP TABLE wallets'];
    for (const kid of plausible) {
      await rejects(verifier.verify(await iss.sign({}, { audience: AUDIENCE, header: { kid } }), project(iss)), /^kid: /);
    }
    expect(iss.fetches.jwks).to.be.at.most(2);
    const invalid: unknown[] = ['has space', 'nul\u0000byte', 'x'.repeat(300), 42, { $ne: null }, ''];
    for (const kid of invalid) {
      await rejects(verifier.verify(await signRaw(iss, JSON.stringify({ alg: 'RS256', kid }), claims(iss)), project(iss)), /^kid: /);
    }
    expect(iss.fetches.jwks).to.be.at.most(2);
  });

  it('refuses oversized tokens before parsing them; an oversized header over HTTP is a 4xx, never a 5xx', async () => {
    const iss = await idp.issuer();
    const verifier = new OidcVerifier(options());
    const big = await iss.sign({ padding: 'x'.repeat(20_000) }, { audience: AUDIENCE });
    await rejects(verifier.verify(big, project(iss)), /longer than 16384/);
    expect(iss.fetches.discovery).to.equal(0);

    const app: TestApp = await startApp();
    try {
      const org = await createOrganisation(app.client);
      const p = await createProject(app.client, org.id, { issuer: iss.issuer });
      for (const size of [17_000, 70_000]) {
        const token = await iss.sign({ padding: 'x'.repeat(size) }, { audience: AUDIENCE });
        const res = await fetch(`${app.url}/api/v1/signin`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body: JSON.stringify({ key: p.projectKey }),
        });
        expect(res.status, String(size)).to.be.within(400, 499);
      }
    } finally {
      await app.close();
    }
  });

  it('refuses nbf in the future and any crit header', async () => {
    const iss = await idp.issuer();
    const verifier = new OidcVerifier(options());
    const later = Math.floor(Date.now() / 1000) + 3600;
    await rejects(verifier.verify(await iss.sign({ nbf: later }, { audience: AUDIENCE }), project(iss)), /^nbf: /);
    const kid = iss.keys[0]?.kid ?? '';
    await rejects(verifier.verify(await signRaw(iss, JSON.stringify({ alg: 'RS256', kid, crit: ['exp'], exp: 1 }), claims(iss)), project(iss)), /^crit: /);
    await rejects(verifier.verify(await signRaw(iss, JSON.stringify({ alg: 'RS256', kid, crit: ['b64'], b64: true }), claims(iss)), project(iss)), /^crit: /);
    await rejects(verifier.verify(await signRaw(iss, JSON.stringify({ alg: 'RS256', kid, crit: [] }), claims(iss)), project(iss)), /^crit: /);
  });

  it('refuses duplicate claim or header names, however they are spelled', async () => {
    const iss = await idp.issuer();
    const verifier = new OidcVerifier(options());
    const header = `{"alg":"RS256","kid":"${iss.keys[0]?.kid}"}`;
    await rejects(verifier.verify(await signRaw(iss, header, claims(iss, ',"email":"victim@example.com"')), project(iss)), /appears twice/);
    await rejects(verifier.verify(await signRaw(iss, header, claims(iss, ',"\\u0065mail":"victim@example.com"')), project(iss)), /appears twice/);
    await rejects(verifier.verify(await signRaw(iss, header, claims(iss, `,"iss":"https://evil.example"`)), project(iss)), /appears twice/);
    await rejects(verifier.verify(await signRaw(iss, `{"alg":"none","alg":"RS256","kid":"${iss.keys[0]?.kid}"}`, claims(iss)), project(iss)), /appears twice/);
    // Nested objects may repeat names of the top level; only the top level is the claim set.
    expect(uniqueTopLevelNames('{"a":1,"b":{"a":2,"b":[{"a":3}]},"c":"\\"a\\":"}')).to.equal(true);
    expect(uniqueTopLevelNames('{"a":1,"b":{"x":2},"a" :3}')).to.equal(false);
  });

  it('refuses a key set with thousands of keys (too large to read) or merely hundreds (more than 100)', async () => {
    const iss = await idp.issuer();
    const one = iss.keys[0]?.publicJwk;
    iss.jwks = { keys: Array.from({ length: 5_000 }, (_, i) => ({ ...one, kid: `bulk-${i}` })) };
    await rejects(new OidcVerifier(options()).verify(await iss.sign({}, { audience: AUDIENCE }), project(iss)), /too_large/);
    const other = await idp.issuer();
    const mine = other.keys[0]?.publicJwk;
    other.jwks = { keys: [mine, ...Array.from({ length: 300 }, (_, i) => ({ ...mine, kid: `bulk-${i}` }))] };
    await rejects(new OidcVerifier(options()).verify(await other.sign({}, { audience: AUDIENCE }), project(other)), /more than 100 keys/);
  });

  it('does not follow a discovery document or a key set that redirects', async () => {
    const redirecting = await idp.issuer();
    redirecting.status = 302;
    await rejects(new OidcVerifier(options()).verify(await redirecting.sign({}, { audience: AUDIENCE }), project(redirecting)), /^discovery document: /);

    // The discovery document is fine but names a key-set URL that redirects.
    const iss = await idp.issuer();
    const elsewhere = await idp.issuer('elsewhere');
    elsewhere.status = 301;
    iss.discovery = { issuer: iss.issuer, jwks_uri: `${elsewhere.issuer}/.well-known/jwks.json` };
    await rejects(new OidcVerifier(options()).verify(await iss.sign({}, { audience: AUDIENCE }), project(iss)), /^key set \(jwks_uri\): /);
  });
});
