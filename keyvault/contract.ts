/**
 * The signer's HTTP contract, version 1 (SIGNER.md): every request body and answer of its API.
 * The signer's server is written against it; the API's client imports it with `import type`
 * only, so the two sides share the shapes without sharing code across the process boundary.
 */
import type { SignerErrorCode } from './errors.js';
import type { StoreHealth } from './stores/types.js';

export type { SignerErrorCode };

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

/** The error codes that say the key store cannot serve now while the signer itself can. */
export type StoreUnavailableCode = Extract<SignerErrorCode, 'vault_sealed' | 'vault_unavailable'>;
