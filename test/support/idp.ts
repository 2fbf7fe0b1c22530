// @peculiar/x509 (through tsyringe) needs the Reflect metadata polyfill loaded first.
import 'reflect-metadata';
import { randomBytes, webcrypto } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import {
  BasicConstraintsExtension,
  cryptoProvider,
  KeyUsageFlags,
  KeyUsagesExtension,
  PemConverter,
  SubjectAlternativeNameExtension,
  X509CertificateGenerator,
} from '@peculiar/x509';
import { exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload } from 'jose';

// @peculiar/x509 is typed with the DOM's WebCrypto types; Node's webcrypto is the same API.
type X509Crypto = Parameters<typeof cryptoProvider.set>[0];
type X509Keys = Parameters<typeof X509CertificateGenerator.createSelfSigned>[0]['keys'];
type CryptoKey = webcrypto.CryptoKey;
cryptoProvider.set(webcrypto as unknown as X509Crypto);

const RSA = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256', publicExponent: new Uint8Array([1, 0, 1]), modulusLength: 2048 };

async function pkcs8Pem(key: X509Keys['privateKey']): Promise<string> {
  return PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', key), 'PRIVATE KEY');
}

/** A certificate authority made at test time; its certificates serve the test IdP. */
export interface TestCa {
  certPem: string;
  /** A server certificate for localhost and 127.0.0.1, and `names` (host names or IPv4 addresses). */
  issue(names?: string[]): Promise<{ certPem: string; keyPem: string }>;
}

export async function createCa(name: string): Promise<TestCa> {
  const keys = (await webcrypto.subtle.generateKey(RSA, true, ['sign', 'verify'])) as unknown as X509Keys;
  const ca = await X509CertificateGenerator.createSelfSigned({
    name: `CN=${name}`,
    keys,
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 86_400_000),
    extensions: [new BasicConstraintsExtension(true, 0, true), new KeyUsagesExtension(KeyUsageFlags.keyCertSign | KeyUsageFlags.cRLSign, true)],
  });
  return {
    certPem: ca.toString('pem'),
    async issue(names: string[] = []) {
      const leafKeys = (await webcrypto.subtle.generateKey(RSA, true, ['sign', 'verify'])) as unknown as X509Keys;
      const leaf = await X509CertificateGenerator.create({
        subject: 'CN=localhost',
        issuer: ca.subject,
        publicKey: leafKeys.publicKey,
        signingKey: keys.privateKey,
        notBefore: new Date(Date.now() - 60_000),
        notAfter: new Date(Date.now() + 86_400_000),
        extensions: [
          new BasicConstraintsExtension(false, undefined, true),
          new KeyUsagesExtension(KeyUsageFlags.digitalSignature | KeyUsageFlags.keyEncipherment, true),
          new SubjectAlternativeNameExtension([
            { type: 'dns', value: 'localhost' },
            { type: 'ip', value: '127.0.0.1' },
            ...names.map((n) => (/^\d+\.\d+\.\d+\.\d+$/.test(n) ? { type: 'ip' as const, value: n } : { type: 'dns' as const, value: n })),
          ]),
        ],
      });
      return { certPem: leaf.toString('pem'), keyPem: await pkcs8Pem(leafKeys.privateKey) };
    },
  };
}

interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

/** One issuer of the test IdP, at `https://127.0.0.1:<port>/<name>`; tests misconfigure it at will. */
export class TestIssuer {
  keys: SigningKey[] = [];
  /** Replaces the discovery document when set. */
  discovery: unknown;
  /** Replaces the key set document when set. */
  jwks: unknown;
  /** Answer every request of this issuer with this status instead. */
  status: number | undefined;
  fetches = { discovery: 0, jwks: 0 };

  constructor(readonly issuer: string) {}

  async addKey(): Promise<SigningKey> {
    const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
    const kid = `k${this.keys.length + 1}-${Math.random().toString(36).slice(2, 8)}`;
    const key = { kid, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } };
    this.keys.push(key);
    return key;
  }

  /** A new key replaces the old ones (what an IdP's rotation looks like to us). */
  async rotate(): Promise<SigningKey> {
    this.keys = [];
    return this.addKey();
  }

  /** A signed token with sane defaults; `claims` and `header` override them. */
  async sign(
    claims: JWTPayload & Record<string, unknown>,
    options: { audience: string; key?: SigningKey; expiresIn?: string | number; header?: Record<string, unknown> },
  ): Promise<string> {
    const key = options.key ?? this.keys[this.keys.length - 1];
    if (!key) throw new Error('the issuer has no key');
    const jwt = new SignJWT({ email: 'user@example.com', email_verified: true, ...claims })
      .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'JWT', ...options.header })
      .setIssuer(typeof claims.iss === 'string' ? claims.iss : this.issuer)
      .setAudience(options.audience)
      .setIssuedAt()
      .setExpirationTime(options.expiresIn ?? '5m')
      .setSubject(typeof claims.sub === 'string' ? claims.sub : 'user-1');
    return jwt.sign(key.privateKey);
  }
}

/** A real HTTPS identity provider with a CA made when it starts, serving any number of issuers (tests and the demo). */
export class TestIdp {
  readonly issuers = new Map<string, TestIssuer>();
  #count = 0;
  // Issuers differ from those of an earlier provider that had this port (one database keeps its organisations' issuers for a whole run).
  readonly #instance = randomBytes(4).toString('hex');

  private constructor(
    readonly server: Server,
    readonly base: string,
    readonly caPem: string,
  ) {}

  static async start(ca?: TestCa): Promise<TestIdp> {
    const authority = ca ?? (await createCa('custody test CA'));
    const { certPem, keyPem } = await authority.issue();
    const holder: { idp?: TestIdp } = {};
    const server = createServer({ cert: certPem, key: keyPem }, (req, res) => {
      const m = /^\/([^/]+)\/\.well-known\/(openid-configuration|jwks\.json)$/.exec(req.url ?? '');
      const issuer = m?.[1] && holder.idp ? holder.idp.issuers.get(m[1]) : undefined;
      if (!m || !issuer) {
        res.writeHead(404).end();
        return;
      }
      const isDiscovery = m[2] === 'openid-configuration';
      if (isDiscovery) issuer.fetches.discovery++;
      else issuer.fetches.jwks++;
      if (issuer.status !== undefined) {
        res.writeHead(issuer.status, { location: `${issuer.issuer}/elsewhere` }).end();
        return;
      }
      const body = isDiscovery
        ? (issuer.discovery ?? { issuer: issuer.issuer, jwks_uri: `${issuer.issuer}/.well-known/jwks.json`, id_token_signing_alg_values_supported: ['RS256'] })
        : (issuer.jwks ?? { keys: issuer.keys.map((k) => k.publicJwk) });
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    holder.idp = new TestIdp(server, `https://127.0.0.1:${(server.address() as AddressInfo).port}`, authority.certPem);
    return holder.idp;
  }

  /** A fresh issuer with one key: tests that misbehave get their own, so caches never couple them. */
  async issuer(label = 'iss'): Promise<TestIssuer> {
    const name = `${label}-${this.#instance}-${++this.#count}`;
    const issuer = new TestIssuer(`${this.base}/${name}`);
    await issuer.addKey();
    this.issuers.set(name, issuer);
    return issuer;
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}
