import { SignerError } from '../errors.js';
import { policyPath } from '../stores/documents.js';
import type { KeyStore } from '../stores/types.js';
import { parsePolicy, type Policy } from './document.js';
import { Versions, type Version } from './versions.js';

export type PolicyVersion = Version<Policy>;

const PROJECT_ID = /^[1-9][0-9]{0,18}$/;

export function projectIdOf(v: unknown, path: string): string {
  const s = typeof v === 'number' && Number.isSafeInteger(v) ? String(v) : v;
  if (typeof s !== 'string' || !PROJECT_ID.test(s)) throw new SignerError('invalid_request', `${path} must be a project id (a positive integer)`);
  return s;
}

/**
 * A project's policy versions (SIGNING.md: static rules are evaluated in the signer from its own
 * store): `policies/<projectId>/v<n>`, each written once, read strictly (parsePolicy).
 */
export class PolicyStore extends Versions<Policy> {
  /** `read`: how a document is read (the signer's: on a reading thread, keyvault/read-pool.ts; a policy of thousands of checksummed addresses costs a hash each). */
  constructor(store: KeyStore, now: () => number = Date.now, refreshMs = 1_000, read: (document: unknown) => Policy | Promise<Policy> = parsePolicy) {
    super(store, policyPath, read, now, refreshMs);
  }
}
