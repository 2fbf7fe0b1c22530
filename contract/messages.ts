/**
 * The signer's HTTP contract, version 1 (keyvault/README.md): every request body and answer of its
 * API. The signer's server is written against it and the API's client reads it, so both sides hold
 * the same shapes.
 */
import type { Caller } from './signing.js';

/** The signer's error codes (keyvault/README.md): the API maps retryable ones to 503 with Retry-After. */
export type SignerErrorCode =
  | 'vault_sealed'
  | 'vault_unavailable'
  | 'auth_failed'
  | 'misconfigured'
  | 'invalid_request'
  | 'invalid_operation'
  | 'invalid_policy'
  | 'policy_conflict'
  | 'policy_denied'
  | 'owner_signature_required'
  | 'invalid_owners'
  | 'invalid_owner_signature'
  | 'wrong_project'
  | 'project_required'
  | 'key_unbound'
  | 'carry_over_conflict'
  | 'unauthorized'
  | 'not_found'
  | 'key_conflict'
  | 'store_owned'
  | 'too_large'
  | 'busy'
  | 'nonce_conflict'
  | 'internal';

/** The key store's state, as `GET /v1/health` answers it. */
export interface StoreHealth {
  backend: 'vault' | 'local';
  ok: boolean;
  initialized?: boolean;
  sealed?: boolean;
  standby?: boolean;
  transitKey?: { name: string; latestVersion: number; minDecryptionVersion: number };
  /** When the Vault credential that cannot renew itself (an AppRole secret id) expires; null: never. */
  credentialExpiresAt?: string | null;
}

/** Every refusal: `retryable` ones (Vault sealed or unreachable) come with `Retry-After`. */
export interface SignerProblem {
  code: SignerErrorCode;
  message: string;
  retryable: boolean;
}

/** `POST /v1/deployment`: binds the store to a deployment (write-once); 409 `store_owned` when it is another's. */
export interface BindRequest {
  deploymentId: string;
}
export type BindAnswer = BindRequest;

/** `POST /v1/keys`: 201 created, 200 the same request again, 409 `key_conflict` when the id holds another request's key. */
export interface CreateKeyRequest {
  /** A random lower-case UUIDv4 chosen by the caller (kept on its row). */
  keyId: string;
  /** 1-200 printable characters: the same request id gets the same key. */
  requestId: string;
  purpose: 'wallet';
  deploymentId: string;
  /**
   * The project the key will sign for, by its identity (a random lower-case UUIDv4, never the
   * database id), stored with it (write-once). Required: 400 `project_required` without it.
   */
  projectId: string;
}
export interface CreatedKey {
  keyId: string;
  /** EIP-55 checksummed. */
  address: string;
  createdAt: string;
}

/** `GET /v1/keys/{keyId}`: 404 `not_found` when there is none. */
export interface KeyLookup {
  keyId: string;
  address: string;
  publicKey: string;
}

/** `GET /v1/health`: 200 when the store is usable, 503 (with the same body) when not. */
export type Health = StoreHealth;

/**
 * `POST /v1/projects/{projectId}/carry-over/documents`: copies the policy versions and policy owners
 * an earlier release kept under the project's database id to its identity (idempotent; 409
 * `carry_over_conflict` when another document is where a copy belongs).
 */
export interface CarryDocumentsRequest {
  deploymentId: string;
  /** The project's database id, as a string: the only place the contract takes one. */
  legacyProjectId: string;
}
/** How many versions of each kind the project has under its identity from the carry-over (0: none). */
export interface CarriedDocuments {
  projectId: string;
  legacyProjectId: string;
  policies: number;
  owners: number;
}

/**
 * `POST /v1/projects/{projectId}/carry-over/keys`: binds keys of an earlier release (at most 200 a
 * request) to the project, as the API's records give them; each answered on its own.
 */
export interface CarryKeysRequest {
  deploymentId: string;
  legacyProjectId: string;
  keyIds: string[];
}
export interface CarriedKeys {
  /** `bound` (now or before, to this project), `absent` (no such key: one made later names its project) or `refused` (why). */
  keys: Array<
    { keyId: string; outcome: 'bound' } | { keyId: string; outcome: 'absent' } | { keyId: string; outcome: 'refused'; code: SignerErrorCode; message: string }
  >;
}

/** `POST /v1/keys/{keyId}/sign`: a structured operation (docs/signing.md), never a hash. */
export interface SignRequestBody {
  /** The project's identity; 403 `wrong_project` for another project's key, 403 `key_unbound` for a key bound to none. */
  projectId: string;
  caller: Caller;
  operation: { method: string; params: unknown };
}
/** 200: the method's answer (`signature`, `signedTransaction` and `hash`, or `authorization`), with what decided it. */
export interface SignAnswer {
  digest: string;
  policyVersion: number;
  rule: string;
  result: Record<string, unknown>;
}
/** 403 `policy_denied`: the problem, with the rule (null: no rule allows this), the version and the digest. */
export interface PolicyDeniedProblem extends SignerProblem {
  rule: string | null;
  policyVersion: number;
  digest: string;
}

/**
 * 409 `nonce_conflict`: the key has signed another transaction at this chain and nonce, and the
 * request does not name one of them as the transaction it replaces (`replaces`). `signed` lists
 * the hashes signed there, oldest first.
 */
export interface NonceConflictProblem extends SignerProblem {
  chainId: string;
  nonce: string;
  signed: string[];
}

/** `PUT /v1/projects/{projectId}/policy`: the next version over `baseVersion` (0 for the first); 409 `policy_conflict` otherwise. */
export interface PutPolicyRequest {
  baseVersion: number;
  /** The policy, or (`signed`) an owner's ES256 JWS over `{ projectId, version, policy }` when the project has owners. */
  policy?: unknown;
  signed?: string;
  /** Who writes it, as the API names its caller (kept with the version). */
  author?: string;
}
/** `PUT /v1/projects/{projectId}/owners` takes `{ baseVersion, owners: { keys } | signed, author? }`; both answer the newest list (version 0, no keys: none). */
export interface OwnersAnswer {
  projectId: string;
  version: number;
  keys: Array<{ kty: 'EC'; crv: 'P-256'; x: string; y: string; kid?: string }>;
  author: string | null;
  createdAt: string | null;
}
/** A stored version, as `GET /v1/projects/{projectId}/policy` (the newest; 404 when none) and `…/versions/{n}` answer. */
export interface PolicyVersionAnswer {
  projectId: string;
  version: number;
  policy: unknown;
  author: string | null;
  createdAt: string;
}
/** `GET /v1/projects/{projectId}/policy/versions?after=&limit=`: oldest first. */
export interface PolicyVersionList {
  versions: PolicyVersionAnswer[];
}

/** `POST /v1/projects/{projectId}/policy/evaluate`: the decision on an operation, nothing signed. */
export interface EvaluateRequest {
  caller: Caller;
  operation: { method: string; params: unknown };
}
export interface EvaluateAnswer {
  allowed: boolean;
  rule: string | null;
  policyVersion: number;
  digest: string;
}

/** The error codes that say the key store cannot serve now while the signer itself can. */
export type StoreUnavailableCode = Extract<SignerErrorCode, 'vault_sealed' | 'vault_unavailable'>;
