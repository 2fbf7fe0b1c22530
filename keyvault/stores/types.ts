import type { StoreHealth } from '../../contract/index.js';
import type { ServiceKeyBackend } from '../service-key.js';

/** What is stored for each key: only ciphertext, never the secret. */
export interface KeyRecord {
  keyId: string;
  address: string;
  /** Uncompressed public key, 0x-prefixed hex. */
  publicKey: string;
  ciphertext: string;
  transitKey: string;
  /** The derivation context the ciphertext is bound to (base64 of the key id). */
  context: string;
  createdAt: string;
  requestId: string;
  /**
   * The project the key signs for, by its identity. Earlier releases stored the project's database
   * id here, or nothing (then bound the key at its first use): such a key signs only once a
   * carry-over has bound it (`key-projects/<keyId>`, keyvault/key-project.ts).
   */
  projectId?: string;
}

/**
 * A write-once document beside the keys (the paths: stores/documents.ts): the project a key of an
 * earlier release signs for, and a project's policy versions and policy owners. Never
 * overwritten, never deleted.
 */
export interface StoredDocument {
  path: string;
  body: Record<string, unknown>;
  createdAt: string;
}

/** A key-encryption backend plus a write-once record store, and the service key (keyvault/service-key.ts). */
export interface KeyStore extends ServiceKeyBackend {
  readonly backend: 'vault' | 'local';
  readonly transitKeyName: string;
  /** Startup checks: throws a SignerError('misconfigured') that says what to fix. */
  check(): Promise<void>;
  health(): Promise<StoreHealth>;
  encrypt(context: string, secret: Uint8Array): Promise<string>;
  decrypt(context: string, ciphertext: string): Promise<Uint8Array>;
  /** Writes once; `exists` when the key id already has a record (never overwritten). */
  putOnce(record: KeyRecord): Promise<'created' | 'exists'>;
  get(keyId: string): Promise<KeyRecord | undefined>;
  /** Writes once; `exists` when the path holds a document already (never overwritten). */
  putDocumentOnce(document: StoredDocument): Promise<'created' | 'exists'>;
  getDocument(path: string): Promise<StoredDocument | undefined>;
  /**
   * The store's owner: writes `deploymentId` as its write-once marker when it has none, and
   * answers the id the marker holds (another deployment's id means the store is not ours).
   */
  claimOwner(deploymentId: string): Promise<string>;
  close(): void;
}
