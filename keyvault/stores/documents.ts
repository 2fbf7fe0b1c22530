import { SignerError } from '../errors.js';
import { KEY_ID, LEGACY_PROJECT_ID, PROJECT_ID } from '../key-id.js';

/**
 * Where each kind of write-once document lives in a store (beside the keys, under the same prefix):
 * - `key-projects/<keyId>`: the project a key of an earlier release signs for, bound by a carry-over;
 * - `policies/<project>/v<n>`, `owners/<project>/v<n>`: a project's policy versions and policy owners,
 *   under the project's identity;
 * - `tx-nonces/<keyId>/<chainId>/<nonce>/v<n>`: the transactions a key signed at a nonce (sign/nonce-guard.ts).
 * Earlier releases wrote `bindings/<keyId>` (a key bound to the first project that used it) and
 * versions under the project's database id; those are read by the carry-over only, never written.
 */
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const QUANTITY = '(0|[1-9][0-9]{0,19})';
const CURRENT_PATH = new RegExp(
  `^(key-projects/${UUID}|(policies|owners)/${UUID}/v[1-9][0-9]{0,8}|tx-nonces/${UUID}/${QUANTITY}/${QUANTITY}/v[1-9][0-9]{0,8})$`,
);
const LEGACY_PATH = new RegExp(`^(bindings/${UUID}|(policies|owners)/[1-9][0-9]{0,18}/v[1-9][0-9]{0,8})$`);

/** The versioned documents of a project. */
export type VersionedKind = 'policies' | 'owners';
export const VERSIONED_KINDS: readonly VersionedKind[] = ['policies', 'owners'];

const keyIdOf = (keyId: string): string => {
  if (!KEY_ID.test(keyId)) throw new SignerError('invalid_request', 'not a key id');
  return keyId;
};

export const keyProjectPath = (keyId: string): string => `key-projects/${keyIdOf(keyId)}`;
/** An earlier release's first-use binding: read by the carry-over, which checks it agrees. */
export const legacyBindingPath = (keyId: string): string => `bindings/${keyIdOf(keyId)}`;

/** The `version`th transaction a key signed at a chain's nonce. */
export const nonceGuardPath = (keyId: string, chainId: bigint, nonce: bigint, version: number): string =>
  `tx-nonces/${keyIdOf(keyId)}/${chainId}/${nonce}/v${version}`;

export function versionPath(kind: VersionedKind, projectId: string, version: number): string {
  if (!PROJECT_ID.test(projectId)) throw new SignerError('invalid_request', 'a document is kept under a project identity only');
  return `${kind}/${projectId}/v${version}`;
}
export function legacyVersionPath(kind: VersionedKind, legacyProjectId: string, version: number): string {
  if (!LEGACY_PROJECT_ID.test(legacyProjectId)) throw new SignerError('invalid_request', 'not a database id of an earlier release');
  return `${kind}/${legacyProjectId}/v${version}`;
}

/**
 * Refuses a path that is not one of the documents' (a key id, the deployment marker, anything
 * else); a write, also one of an earlier release's paths: nothing new is keyed by a database id.
 */
export function checkDocumentPath(path: string, use: 'read' | 'write'): string {
  if (CURRENT_PATH.test(path) || (use === 'read' && LEGACY_PATH.test(path))) return path;
  throw new SignerError('invalid_request', use === 'write' && LEGACY_PATH.test(path) ? 'a path of an earlier release is never written' : 'not a document path');
}
