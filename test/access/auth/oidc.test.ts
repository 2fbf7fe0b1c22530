import { createHmac } from 'node:crypto';
import { expect } from 'chai';
import { exportSPKI, importJWK } from 'jose';
import { InvalidTokenError, OidcVerifier, type OidcOptions } from '../../../src/access/auth/oidc.js';
import { loadConfig } from '../../../src/platform/config/config.js';
import { createCa, TestIdp, type TestIssuer } from '../../support/idp.js';

const AUDIENCE = 'urn:custody:test';

describe('OIDC verification of end-user JWTs against a real HTTPS identity provider', function () {
  this.timeout(30_000);
  let idp: TestIdp;
  let now = Date.now();
  const options = (over: Partial<OidcOptions> = {}): OidcOptions => ({
    audience: AUDIENCE,
    clockToleranceS: 30,
    cacheTtlS: 600,
    maxIssuers: 100,
    refetchIntervalMs: 10_000,
    fetchTimeoutMs: 2_000,
    egress: { allow: ['127.0.0.0/8', '::1/128'] },
    extraCa: idp.caPem,
    now: () => now,
    ...over,
  });
  const project = (iss: TestIssuer, requireVerifiedEmail = true) => ({ issuer: iss.issuer, requireVerifiedEmail });

  async function rejects(promise: Promise<unknown>, detail: RegExp): Promise<void> {
    try {
      await promise;
    } catch (err) {
      expect(err).to.be.instanceOf(InvalidTokenError);
      expect((err as InvalidTokenError).status).to.equal(401);
      expect((err as InvalidTokenError).code).to.equal('invalid_token');
      expect((err as InvalidTokenError).detail).to.match(detail);
      return;
    }
    expect.fail(`expected a 401 matching ${String(detail)}`);
  }

  before(async () => {
    idp = await TestIdp.start();
  });
  beforeEach(() => {
    now = Date.now();
  });
  after(() => idp.close());

  it('accepts a valid token and returns its email', async () => {
    const iss = await idp.issuer();
    const v = new OidcVerifier(options());
    const user = await v.verify(await iss.sign({ email: 'Ada@Example.com' }, { audience: AUDIENCE }), project(iss));
    expect(user.email).to.equal('Ada@Example.com');
  });

  it('refuses a wrong iss, a wrong aud, an expired token and a missing email', async () => {
    const iss = await idp.issuer();
    const v = new OidcVerifier(options());
    await rejects(v.verify(await iss.sign({ iss: 'https://evil.example.com' }, { audience: AUDIENCE }), project(iss)), /^iss:/);
    await rejects(v.verify(await iss.sign({}, { audience: 'urn:other' }), project(iss)), /^aud:/);
    await rejects(v.verify(await iss.sign({}, { audience: AUDIENCE, expiresIn: Math.floor(Date.now() / 1000) - 120 }), project(iss)), /^exp:/);
    await rejects(v.verify(await iss.sign({ email: undefined }, { audience: AUDIENCE }), project(iss)), /^email:/);
  });

  it('refuses alg none and HS256 signed with the public key', async () => {
    const iss = await idp.issuer();
    const v = new OidcVerifier(options());
    const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const claims = { iss: iss.issuer, aud: AUDIENCE, exp: Math.floor(Date.now() / 1000) + 300, email: 'a@example.com' };
    await rejects(v.verify(`${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims)}.`, project(iss)), /^alg:/);
    const key = iss.keys[0]!;
    const pem = await exportSPKI((await importJWK(key.publicJwk, 'RS256')) as Parameters<typeof exportSPKI>[0]);
    const signingInput = `${b64({ alg: 'HS256', typ: 'JWT', kid: key.kid })}.${b64(claims)}`;
    const forged = `${signingInput}.${createHmac('sha256', pem).update(signingInput).digest('base64url')}`;
    await rejects(v.verify(forged, project(iss)), /^alg:/);
  });

  it('re-fetches the key set once for an unknown kid (the IdP rotated), rate-limited', async () => {
    const iss = await idp.issuer();
    const v = new OidcVerifier(options());
    await v.verify(await iss.sign({}, { audience: AUDIENCE }), project(iss));
    expect(iss.fetches.jwks).to.equal(1);
    const rotated = await iss.rotate();
    now += 11_000;
    const user = await v.verify(await iss.sign({}, { audience: AUDIENCE, key: rotated }), project(iss));
    expect(user.email).to.equal('user@example.com');
    expect(iss.fetches.jwks).to.equal(2);
    // A kid nobody has: no second re-fetch within the interval.
    const stranger = await (await idp.issuer()).addKey();
    await rejects(v.verify(await iss.sign({}, { audience: AUDIENCE, key: stranger }), project(iss)), /^kid:/);
    expect(iss.fetches.jwks).to.equal(2);
  });

  it("with the service's default re-fetch interval, accepts a key the IdP just published about a second after the last fetch", async () => {
    const interval = loadConfig({ DATA_DIR: '/tmp' }).jwksRefetchIntervalMs;
    expect(interval).to.be.at.most(1_000);
    const iss = await idp.issuer();
    const v = new OidcVerifier(options({ refetchIntervalMs: interval }));
    await v.verify(await iss.sign({}, { audience: AUDIENCE }), project(iss));
    const published = await iss.rotate();
    const token = await iss.sign({}, { audience: AUDIENCE, key: published });
    now += interval / 2;
    await rejects(v.verify(token, project(iss)), /^kid:/);
    expect(iss.fetches.jwks).to.equal(1);
    now += interval / 2;
    expect((await v.verify(token, project(iss))).email).to.equal('user@example.com');
    expect(iss.fetches.jwks).to.equal(2);
  });

  it('caches discovery and keys for the configured lifetime', async () => {
    const iss = await idp.issuer();
    const v = new OidcVerifier(options({ cacheTtlS: 60 }));
    for (let i = 0; i < 3; i++) await v.verify(await iss.sign({}, { audience: AUDIENCE }), project(iss));
    expect(iss.fetches).to.deep.equal({ discovery: 1, jwks: 1 });
    now += 61_000;
    await v.verify(await iss.sign({}, { audience: AUDIENCE }), project(iss));
    expect(iss.fetches).to.deep.equal({ discovery: 2, jwks: 2 });
  });

  it('refuses keys that are not an array, an unreachable discovery and a discovery issuer mismatch', async () => {
    const v = new OidcVerifier(options());
    const notArray = await idp.issuer('not-array');
    notArray.jwks = { keys: { kid: 'x' } };
    await rejects(v.verify(await notArray.sign({}, { audience: AUDIENCE }), project(notArray)), /"keys" is not an array/);

    const down = await idp.issuer('down');
    down.status = 503;
    await rejects(v.verify(await down.sign({}, { audience: AUDIENCE }), project(down)), /^discovery document: answered HTTP 503/);
    const gone = { issuer: 'https://127.0.0.1:9/nothing', requireVerifiedEmail: true };
    await rejects(v.verify(await down.sign({ iss: gone.issuer }, { audience: AUDIENCE }), gone), /^discovery document: unreachable/);

    const mismatch = await idp.issuer('mismatch');
    mismatch.discovery = { issuer: 'https://someone-else.example.com', jwks_uri: `${mismatch.issuer}/.well-known/jwks.json` };
    await rejects(v.verify(await mismatch.sign({}, { audience: AUDIENCE }), project(mismatch)), /issuer does not equal/);
  });

  it('does not follow redirects', async () => {
    const iss = await idp.issuer('redirect');
    iss.status = 302;
    await rejects(new OidcVerifier(options()).verify(await iss.sign({}, { audience: AUDIENCE }), project(iss)), /redirect/);
  });

  it('refuses email_verified false when the project requires it, and accepts it when not', async () => {
    const iss = await idp.issuer();
    const v = new OidcVerifier(options());
    const token = await iss.sign({ email_verified: false }, { audience: AUDIENCE });
    await rejects(v.verify(token, project(iss, true)), /^email_verified:/);
    expect((await v.verify(token, project(iss, false))).email).to.equal('user@example.com');
  });

  it('reads email_verified as providers send it: true and "true" verified, every other value refused, absent not a statement', async () => {
    const iss = await idp.issuer();
    const v = new OidcVerifier(options());
    // Google, Auth0 and Okta send a boolean; Cognito sends the strings "true"/"false".
    for (const verified of [true, 'true', undefined]) {
      const token = await iss.sign(verified === undefined ? {} : { email_verified: verified }, { audience: AUDIENCE });
      expect((await v.verify(token, project(iss, true))).email, String(verified)).to.equal('user@example.com');
    }
    for (const refused of [false, 'false', 'False', 'TRUE', 'True', 'yes', '1', 1, 0, null, '', [], {}]) {
      const token = await iss.sign({ email_verified: refused }, { audience: AUDIENCE });
      await rejects(v.verify(token, project(iss, true)), /^email_verified:/);
      // A project that does not require verification takes the token whatever the claim says.
      expect((await v.verify(token, project(iss, false))).email).to.equal('user@example.com');
    }
  });

  it('refuses an e-mail claim holding a NUL or an unpaired surrogate', async () => {
    const iss = await idp.issuer();
    const v = new OidcVerifier(options());
    for (const email of ['a\u0000b@example.com', 'lone\ud800@example.com', '\udc00@example.com']) {
      await rejects(v.verify(await iss.sign({ email }, { audience: AUDIENCE }), project(iss, false)), /^email: the claim holds/);
    }
  });

  it('refuses an IdP whose certificate comes from an untrusted CA', async () => {
    const other = await TestIdp.start(await createCa('untrusted CA'));
    try {
      const iss = await other.issuer();
      await rejects(new OidcVerifier(options()).verify(await iss.sign({}, { audience: AUDIENCE }), project(iss)), /^discovery document: unreachable \(tls/);
    } finally {
      await other.close();
    }
  });

  it('applies the egress rules in every environment: a loopback IdP is refused unless EGRESS_ALLOW_PRIVATE allows it', async () => {
    const iss = await idp.issuer();
    const token = await iss.sign({}, { audience: AUDIENCE });
    await rejects(new OidcVerifier(options({ egress: { allow: [] } })).verify(token, project(iss)), /ssrf_blocked/);
    const allowed = new OidcVerifier(options({ egress: { allow: ['127.0.0.0/8'] } }));
    expect((await allowed.verify(token, project(iss))).email).to.equal('user@example.com');
  });
});
