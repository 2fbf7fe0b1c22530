import { duplicateName } from '../../contract/index.js';
import { compactVerify, importJWK } from 'jose';
import { SignerError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { object } from '../sign/input.js';
import type { KeyStore } from '../stores/types.js';
import { Versions } from './versions.js';

/**
 * Owner-signed policies (docs/signing.md), optional per project: once a project has policy owners
 * (P-256 public JWKs), the signer accepts a new policy version, or a new owner list, only inside an
 * owner's ES256 JWS naming the project and the version it becomes. An admin token, or the API
 * process itself, can then no longer widen what a wallet may sign.
 */
export interface OwnerKey {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  kid?: string;
}

const COORDINATE = /^[A-Za-z0-9_-]{43}$/;
const MAX_OWNERS = LIMITS.owners;
/** A signed policy carries the policy: no longer than the body it came in. */
const MAX_JWS = LIMITS.body.document;

const refuse = (path: string, message: string): never => {
  throw new SignerError('invalid_owners', `${path} ${message}`);
};

function parseKey(v: unknown, path: string): OwnerKey {
  const k = object(v, path, ['kty', 'crv', 'x', 'y', 'kid', 'd'], ['kty', 'crv', 'x', 'y']);
  if (k['d'] !== undefined) return refuse(`${path}/d`, 'is a private key: register the public key only');
  if (k['kty'] !== 'EC' || k['crv'] !== 'P-256') return refuse(path, 'must be a P-256 public key (kty EC, crv P-256)');
  const { x, y, kid } = k;
  if (typeof x !== 'string' || !COORDINATE.test(x)) return refuse(`${path}/x`, 'must be 32 bytes, base64url');
  if (typeof y !== 'string' || !COORDINATE.test(y)) return refuse(`${path}/y`, 'must be 32 bytes, base64url');
  if (kid !== undefined && (typeof kid !== 'string' || !/^[\x21-\x7e]{1,100}$/.test(kid))) return refuse(`${path}/kid`, 'must be 1-100 printable characters');
  return { kty: 'EC', crv: 'P-256', x, y, ...(kid === undefined ? {} : { kid }) };
}

/** `{ keys: [...] }`: at most ten owners, each once; an empty list ends owner signing (an owner must sign that). */
export function parseOwners(document: unknown): OwnerKey[] {
  try {
    const d = object(document, '', ['keys'], ['keys']);
    const keys = d['keys'];
    if (!Array.isArray(keys) || keys.length > MAX_OWNERS) return refuse('/keys', `must be a list of at most ${MAX_OWNERS} keys`);
    const parsed = keys.map((k, i) => parseKey(k, `/keys/${i}`));
    if (new Set(parsed.map((k) => `${k.x}.${k.y}`)).size !== parsed.length) return refuse('/keys', 'names a key twice');
    return parsed;
  } catch (err) {
    // The shared object reader names the path as operations do.
    if (err instanceof SignerError && err.code === 'invalid_operation') throw new SignerError('invalid_owners', err.message);
    throw err;
  }
}

export class OwnerStore extends Versions<OwnerKey[]> {
  // Read afresh at every write (refresh 0): an owner list written through another replica binds at once.
  constructor(store: KeyStore, now: () => number = Date.now) {
    super(store, 'owners', parseOwners, now, 0);
  }
}

/** What a write carries: the document itself, or an owner's JWS over it. */
export interface Submitted {
  plain: unknown;
  signed: unknown;
}

/**
 * The document a write of `kind` may store as version `version` of the project: the plain one when
 * the project has no owners; otherwise the one inside a JWS an owner key verifies, which must name
 * this project and this version (a signature for another project, or replayed for another
 * version, is refused).
 */
export async function admitted(
  owners: OwnerStore,
  projectId: string,
  version: number,
  kind: 'policy' | 'owners',
  submitted: Submitted,
  recoveryKeys: readonly OwnerKey[] = [],
): Promise<{ document: unknown; by: 'plain' | 'owner' | 'recovery' }> {
  const ownerKeys = (await owners.latest(projectId))?.value ?? [];
  if (ownerKeys.length === 0) {
    if (submitted.signed !== undefined) throw new SignerError('invalid_owners', '/signed the project has no policy owners: send the document itself');
    if (submitted.plain === undefined) throw new SignerError('invalid_owners', `/${kind} is required`);
    return { document: submitted.plain, by: 'plain' };
  }
  // The operator's recovery keys (KEYVAULT_RECOVERY_KEYS_FILE) may replace lost owners, never sign a policy.
  const keys = kind === 'owners' ? [...ownerKeys, ...recoveryKeys] : ownerKeys;
  if (submitted.signed === undefined)
    throw new SignerError('owner_signature_required', `the project has policy owners: a new ${kind} version needs an owner's ES256 signature`);
  if (submitted.plain !== undefined) throw new SignerError('invalid_owners', '/signed carries the document: send it alone');
  const jws = submitted.signed;
  if (typeof jws !== 'string' || jws.length > MAX_JWS) throw new SignerError('invalid_owner_signature', 'signed must be a compact JWS');
  let payload: Uint8Array | undefined;
  let by: 'owner' | 'recovery' = 'owner';
  for (const [i, key] of keys.entries()) {
    try {
      payload = (await compactVerify(jws, await importJWK({ ...key }, 'ES256'), { algorithms: ['ES256'] })).payload;
      by = i < ownerKeys.length ? 'owner' : 'recovery';
      break;
    } catch {
      // Not this owner's signature: the next owner's key may verify it.
    }
  }
  if (!payload) throw new SignerError('invalid_owner_signature', "the signature is no owner key's ES256 signature");
  let claims: unknown;
  const text = Buffer.from(payload).toString('utf8');
  try {
    claims = JSON.parse(text);
  } catch {
    throw new SignerError('invalid_owner_signature', 'the signed payload is not JSON');
  }
  // Read one way here and another by whoever checked what the owner signed: refused.
  if (duplicateName(text)) throw new SignerError('invalid_owner_signature', 'the signed payload repeats a member name');
  const c = claims as Record<string, unknown>;
  if (typeof claims !== 'object' || claims === null || Object.keys(c).sort().join() !== ['projectId', 'version', kind].sort().join())
    throw new SignerError('invalid_owner_signature', `the signed payload must be exactly { projectId, version, ${kind} }`);
  // The project's identity, never its database id: a signature over a number would also open the
  // project that number goes to after a restore.
  if (c['projectId'] !== projectId)
    throw new SignerError(
      'invalid_owner_signature',
      typeof c['projectId'] === 'number' || /^[0-9]+$/.test(String(c['projectId']))
        ? `the signature names a numeric project id: sign over the project's identity (${projectId})`
        : `the signature is for project ${String(c['projectId'])}, not ${projectId}`,
    );
  if (c['version'] !== version)
    throw new SignerError('policy_conflict', `the signature is for version ${String(c['version'])}; the next version is ${version}`);
  return { document: c[kind], by };
}
