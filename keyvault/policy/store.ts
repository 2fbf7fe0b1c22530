import { SignerError } from '../errors.js';
import { policyPath } from '../stores/documents.js';
import type { KeyStore } from '../stores/types.js';
import { parsePolicy, type Policy } from './document.js';

export interface PolicyVersion {
  version: number;
  /** Who wrote it, as the API named the caller (a token id, the operator). */
  author: string | undefined;
  policy: Policy;
  /** The document as written, presented back as it was given. */
  document: unknown;
  createdAt: string;
}

const PROJECT_ID = /^[1-9][0-9]{0,18}$/;

export function projectIdOf(v: unknown, path: string): string {
  const s = typeof v === 'number' && Number.isSafeInteger(v) ? String(v) : v;
  if (typeof s !== 'string' || !PROJECT_ID.test(s)) throw new SignerError('invalid_request', `${path} must be a project id (a positive integer)`);
  return s;
}

/**
 * A project's policy versions in the signer's own store (SIGNING.md: static rules are evaluated
 * in the signer from its store): `policies/<projectId>/v<n>`, each written once. The newest is
 * found by reading v(n+1) until there is none; what a signer knows is read again when older
 * than `refreshMs`, so that a version written through another signer replica applies within it.
 * A signer never goes back to a version older than one it has seen.
 */
export class PolicyStore {
  readonly #known = new Map<string, { latest: PolicyVersion | undefined; checkedAt: number }>();

  constructor(
    private readonly store: KeyStore,
    private readonly now: () => number = Date.now,
    private readonly refreshMs = 1_000,
  ) {}

  async #read(projectId: string, version: number): Promise<PolicyVersion | undefined> {
    const doc = await this.store.getDocument(policyPath(projectId, version));
    if (!doc) return undefined;
    const body = doc.body as { projectId?: unknown; version?: unknown; policy?: unknown; author?: unknown };
    // A document moved under another project's path does not apply there.
    if (body.projectId !== projectId || body.version !== version) throw new SignerError('internal', `the policy document at ${doc.path} is not its own`);
    const author = typeof body.author === 'string' ? body.author : undefined;
    return { version, author, policy: parsePolicy(body.policy), document: body.policy, createdAt: doc.createdAt };
  }

  /** The newest version, or undefined when the project has none (default deny). */
  async latest(projectId: string): Promise<PolicyVersion | undefined> {
    const known = this.#known.get(projectId);
    if (known && this.now() - known.checkedAt < this.refreshMs) return known.latest;
    let latest = known?.latest;
    for (;;) {
      const next = await this.#read(projectId, (latest?.version ?? 0) + 1);
      if (!next) break;
      latest = next;
    }
    this.#known.set(projectId, { latest, checkedAt: this.now() });
    return latest;
  }

  async version(projectId: string, version: number): Promise<PolicyVersion | undefined> {
    return this.#read(projectId, version);
  }

  /** Versions after `after`, oldest first, at most `limit`. */
  async list(projectId: string, after: number, limit: number): Promise<PolicyVersion[]> {
    const out: PolicyVersion[] = [];
    for (let v = after + 1; out.length < limit; v++) {
      const found = await this.#read(projectId, v);
      if (!found) break;
      out.push(found);
    }
    return out;
  }

  /**
   * Writes version `baseVersion + 1`, checked first; 409 `policy_conflict` when the base is not
   * the newest (another writer got there first: read again and decide again).
   */
  async put(projectId: string, document: unknown, baseVersion: number, author?: string): Promise<PolicyVersion> {
    const policy = parsePolicy(document);
    const latest = await this.latest(projectId);
    if ((latest?.version ?? 0) !== baseVersion)
      throw new SignerError('policy_conflict', `the newest policy version is ${latest?.version ?? 0}, not ${baseVersion}`);
    const version = baseVersion + 1;
    const createdAt = new Date(this.now()).toISOString();
    const body = { projectId, version, policy: document, ...(author === undefined ? {} : { author }) };
    const written = await this.store.putDocumentOnce({ path: policyPath(projectId, version), body, createdAt });
    if (written === 'exists') throw new SignerError('policy_conflict', `policy version ${version} was written by another request`);
    const stored = { version, author, policy, document, createdAt };
    this.#known.set(projectId, { latest: stored, checkedAt: this.now() });
    return stored;
  }
}
