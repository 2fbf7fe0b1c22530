import type { KeyStore } from '../stores/types.js';
import { parsePolicy, type Policy } from './document.js';
import { Versions, type Version } from './versions.js';

export type PolicyVersion = Version<Policy>;

/**
 * A project's policy versions (docs/signing.md: static rules are evaluated in the signer from its own
 * store): `policies/<project identity>/v<n>`, each written once, read strictly (parsePolicy).
 */
export class PolicyStore extends Versions<Policy> {
  /** `read`: how a document is read (the signer's: on a reading thread, keyvault/read-pool.ts; a policy of thousands of checksummed addresses costs a hash each). */
  constructor(store: KeyStore, now: () => number = Date.now, refreshMs = 1_000, read: (document: unknown) => Policy | Promise<Policy> = parsePolicy) {
    super(store, 'policies', read, now, refreshMs);
  }
}
