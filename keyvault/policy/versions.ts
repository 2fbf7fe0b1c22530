import { SignerError } from '../errors.js';
import { LEGACY_PROJECT_ID } from '../key-id.js';
import { legacyVersionPath, versionPath, type VersionedKind } from '../stores/documents.js';
import type { KeyStore, StoredDocument } from '../stores/types.js';

/** A stored version of a project's document: what was written, by whom, when. */
export interface Version<T> {
  version: number;
  /** Who wrote it, as the API named the caller (a token id, the operator). */
  author: string | undefined;
  value: T;
  /** The document as written, presented back as it was given. */
  document: unknown;
  createdAt: string;
}

/**
 * A version an earlier release wrote under the project's database id, as a carry-over copies it
 * under the project's identity (keyvault/carry-over.ts): the original body and time, unchanged,
 * inside a body that names the identity.
 */
export interface CarriedBody {
  projectId: string;
  version: number;
  carriedFrom: { path: string; body: Record<string, unknown> };
  carriedAt: string;
}

/**
 * The body a version of `projectId` was written with: its own, or, for a carried copy, the
 * original's once it is checked to be version `version` of the database id it names. A document
 * moved under another project's path, or another version's, does not apply there.
 */
export function ownBody(kind: VersionedKind, doc: StoredDocument, projectId: string, version: number): Record<string, unknown> {
  const body = doc.body;
  const notOwn = () => new SignerError('internal', `the document at ${doc.path} is not its own`);
  if (body['projectId'] !== projectId || body['version'] !== version) throw notOwn();
  const from = (body as Partial<CarriedBody>).carriedFrom;
  if (from === undefined) return body;
  const original = typeof from === 'object' && from !== null ? from.body : undefined;
  const legacy = original?.['projectId'];
  if (
    typeof original !== 'object' ||
    original === null ||
    typeof legacy !== 'string' ||
    !LEGACY_PROJECT_ID.test(legacy) ||
    original['version'] !== version ||
    from.path !== legacyVersionPath(kind, legacy, version)
  )
    throw notOwn();
  return original;
}

/**
 * A project's versioned document in the signer's own store (policies, policy owners): version n at
 * `<kind>/<projectId>/v<n>`, each written once. The newest is found by reading v(n+1) until there is
 * none; what this signer knows is read again when older than `refreshMs`, so that a version
 * written through another replica applies within it. A signer never goes back to an older one.
 */
export class Versions<T> {
  readonly #known = new Map<string, { latest: Version<T> | undefined; checkedAt: number }>();

  constructor(
    private readonly store: KeyStore,
    private readonly kind: VersionedKind,
    /** Reads a stored document (strictly: a stored document is trusted no more than a written one); may be done off the main thread. */
    private readonly read: (document: unknown) => T | Promise<T>,
    private readonly now: () => number,
    private readonly refreshMs: number,
  ) {}

  async #read(projectId: string, version: number): Promise<Version<T> | undefined> {
    const doc = await this.store.getDocument(versionPath(this.kind, projectId, version));
    if (!doc) return undefined;
    const body = ownBody(this.kind, doc, projectId, version) as { document?: unknown; policy?: unknown; author?: unknown };
    const author = typeof body.author === 'string' ? body.author : undefined;
    // Policy versions written before owners existed name their document `policy`.
    const document = body.document ?? body.policy;
    return { version, author, value: await this.read(document), document, createdAt: doc.createdAt };
  }

  /** The newest version, or undefined when the project has none. */
  async latest(projectId: string): Promise<Version<T> | undefined> {
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

  /** Forgets what it knows of a project (a carry-over wrote its versions beside this cache). */
  forget(projectId: string): void {
    this.#known.delete(projectId);
  }

  version(projectId: string, version: number): Promise<Version<T> | undefined> {
    return this.#read(projectId, version);
  }

  /** Versions after `after`, oldest first, at most `limit`. */
  async list(projectId: string, after: number, limit: number): Promise<Array<Version<T>>> {
    const out: Array<Version<T>> = [];
    for (let v = after + 1; out.length < limit; v++) {
      const found = await this.#read(projectId, v);
      if (!found) break;
      out.push(found);
    }
    return out;
  }

  /**
   * Writes version `baseVersion + 1`, read first; 409 `policy_conflict` when the base is not the
   * newest (another writer got there first: read again and decide again).
   */
  async put(projectId: string, document: unknown, baseVersion: number, author?: string): Promise<Version<T>> {
    const value = await this.read(document);
    const latest = await this.latest(projectId);
    if ((latest?.version ?? 0) !== baseVersion) throw new SignerError('policy_conflict', `the newest version is ${latest?.version ?? 0}, not ${baseVersion}`);
    const version = baseVersion + 1;
    const createdAt = new Date(this.now()).toISOString();
    const body = { projectId, version, document, ...(author === undefined ? {} : { author }) };
    const written = await this.store.putDocumentOnce({ path: versionPath(this.kind, projectId, version), body, createdAt });
    if (written === 'exists') throw new SignerError('policy_conflict', `version ${version} was written by another request`);
    const stored = { version, author, value, document, createdAt };
    this.#known.set(projectId, { latest: stored, checkedAt: this.now() });
    return stored;
  }
}
