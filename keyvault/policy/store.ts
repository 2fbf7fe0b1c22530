import type { KeyStore } from '../stores/types.js';
import { parsePolicy, type Policy } from './document.js';
import { Versions, type Version } from './versions.js';

export type PolicyVersion = Version<Policy>;

/**
 * A project's policy versions (SIGNING.md: static rules are evaluated in the signer from its own
 * store): `policies/<project identity>/v<n>`, each written once, read strictly (parsePolicy).
 */
export class PolicyStore extends Versions<Policy> {
  constructor(store: KeyStore, now: () => number = Date.now, refreshMs = 1_000) {
    super(store, 'policies', parsePolicy, now, refreshMs);
  }
}
