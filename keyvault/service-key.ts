import { createHash, createPublicKey } from 'node:crypto';
import { SERVICE_PAYLOAD_FIELDS, SERVICE_PURPOSES, isServicePurpose, type ServiceJwk, type ServiceSignAnswer } from '../contract/index.js';
import { fields } from './envelope.js';
import { SignerError } from './errors.js';

/** A version of the service key as a store reports it: its number and its public key (SPKI PEM or a JWK's coordinates). */
export interface ServiceKeyVersion {
  version: number;
  publicKey: { pem: string } | { x: string; y: string };
}

/** What a key store offers of the service key: its live versions and a raw ES256 signature (r‖s, 64 bytes) by one of them. */
export interface ServiceKeyBackend {
  /** Every version not yet retired, and the newest (what signs). */
  serviceVersions(): Promise<{ latest: number; versions: ServiceKeyVersion[] }>;
  serviceSignRaw(version: number, signingInput: Buffer): Promise<Buffer>;
}

const b64u = (b: Buffer | string) => Buffer.from(b).toString('base64url');

/** The JWK of a version, its `kid` the RFC 7638 thumbprint: unique per key material, so a key made again under the same name never shares one. */
export function jwkOf(v: ServiceKeyVersion): ServiceJwk {
  let x: string;
  let y: string;
  if ('pem' in v.publicKey) {
    const jwk = createPublicKey(v.publicKey.pem).export({ format: 'jwk' });
    if (jwk.kty !== 'EC' || jwk.crv !== 'P-256' || typeof jwk.x !== 'string' || typeof jwk.y !== 'string')
      throw new SignerError('misconfigured', 'the service key is not a P-256 key');
    ({ x, y } = { x: jwk.x, y: jwk.y });
  } else ({ x, y } = v.publicKey);
  const kid = createHash('sha256')
    .update(JSON.stringify({ crv: 'P-256', kty: 'EC', x, y }))
    .digest('base64url');
  return { kty: 'EC', crv: 'P-256', x, y, kid, alg: 'ES256', use: 'sig' };
}

const PRINTABLE = /^[\x20-\x7e]{1,512}$/;

/** The payload of `purpose`, exactly its fields with their types, in the contract's order (the bytes signed are ours). */
function payloadOf(purpose: keyof typeof SERVICE_PURPOSES, raw: unknown): Record<string, string | number> {
  const spec = SERVICE_PAYLOAD_FIELDS[purpose];
  const given = fields(raw, Object.keys(spec));
  const out: Record<string, string | number> = {};
  for (const [name, type] of Object.entries(spec)) {
    const v = given[name];
    if (type === 'number' ? !(typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) : !(typeof v === 'string' && PRINTABLE.test(v)))
      throw new SignerError('invalid_request', `payload.${name} must be ${type === 'number' ? 'a non-negative integer' : '1-512 printable characters'}`);
    out[name] = v as string | number;
  }
  if (purpose === 'membership-attestation' && out['status'] !== 'active') throw new SignerError('invalid_request', 'an attestation is of an active membership');
  if (purpose === 'membership-attestation' && !((out['exp'] as number) > (out['iat'] as number)))
    throw new SignerError('invalid_request', 'payload.exp must be after payload.iat');
  if (purpose === 'audit-checkpoint' && !/^[0-9a-f]{64}$/.test(String(out['head'])))
    throw new SignerError('invalid_request', 'payload.head must be 64 hex digits');
  return out;
}

/**
 * Service signatures (contract/service.ts): the signer builds the protected header and the payload
 * itself and the store signs the result. The store's versions are cached briefly: a rotation in
 * Vault shows here (and in the API's JWKS) within `cacheMs`.
 */
export class ServiceKey {
  #cached: { at: number; latest: number; keys: Array<ServiceJwk & { version: number }> } | undefined;

  constructor(
    private readonly backend: ServiceKeyBackend,
    private readonly now: () => number = Date.now,
    private readonly cacheMs = 5_000,
  ) {}

  async #versions(): Promise<{ latest: number; keys: Array<ServiceJwk & { version: number }> }> {
    const c = this.#cached;
    if (c && this.now() - c.at < this.cacheMs) return c;
    const { latest, versions } = await this.backend.serviceVersions();
    const keys = versions.sort((a, b) => b.version - a.version).map((v) => ({ ...jwkOf(v), version: v.version }));
    this.#cached = { at: this.now(), latest, keys };
    return this.#cached;
  }

  /** The public keys, newest first. */
  async keys(): Promise<ServiceJwk[]> {
    return (await this.#versions()).keys.map(({ version: _version, ...jwk }) => jwk);
  }

  /** A request body `{ purpose, payload }` → a compact JWS by the newest version. */
  async sign(body: unknown): Promise<ServiceSignAnswer> {
    const b = fields(body, ['purpose', 'payload']);
    const purpose = b['purpose'];
    if (!isServicePurpose(purpose)) throw new SignerError('invalid_request', `purpose must be one of ${Object.keys(SERVICE_PURPOSES).join(', ')}`);
    const payload = payloadOf(purpose, b['payload']);
    const { latest, keys } = await this.#versions();
    const key = keys.find((k) => k.version === latest);
    if (!key) throw new SignerError('misconfigured', 'the service key has no usable version');
    const input = `${b64u(JSON.stringify({ alg: 'ES256', kid: key.kid, typ: SERVICE_PURPOSES[purpose] }))}.${b64u(JSON.stringify(payload))}`;
    const signature = await this.backend.serviceSignRaw(key.version, Buffer.from(input, 'ascii'));
    if (signature.length !== 64) throw new SignerError('vault_unavailable', 'the service signature is not 64 bytes');
    return { jws: `${input}.${b64u(signature)}`, kid: key.kid };
  }
}
