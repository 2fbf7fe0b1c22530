import { isDeepStrictEqual } from 'node:util';
import type { CarriedKeys } from '../contract/index.js';
import { SignerError } from './errors.js';
import { PROJECT_ID } from './key-id.js';
import { boundProject } from './key-project.js';
import type { CarriedBody } from './policy/versions.js';
import { keyProjectPath, legacyBindingPath, legacyVersionPath, versionPath, VERSIONED_KINDS, type VersionedKind } from './stores/documents.js';
import type { KeyStore, StoredDocument } from './stores/types.js';

/**
 * What earlier releases keyed by a project's database id, carried over to the project's identity
 * when the API, which knows which id is which project, asks (once per project after an upgrade).
 * Documents are copied version by version, never rewritten: the original body and time go into
 * the copy unchanged, and the original stays where it is, read by nothing but this. Running it
 * again finds its copies and changes nothing; another document where a copy belongs is a conflict.
 */
export async function carryDocuments(store: KeyStore, projectId: string, legacyProjectId: string, now: () => number): Promise<Record<VersionedKind, number>> {
  const counts: Record<VersionedKind, number> = { policies: 0, owners: 0 };
  for (const kind of VERSIONED_KINDS) {
    for (let version = 1; ; version++) {
      const original = await store.getDocument(legacyVersionPath(kind, legacyProjectId, version));
      if (!original) break;
      if (original.body['projectId'] !== legacyProjectId || original.body['version'] !== version)
        throw new SignerError('internal', `the document at ${original.path} is not its own`);
      const body: CarriedBody = {
        projectId,
        version,
        carriedFrom: { path: original.path, body: original.body },
        carriedAt: new Date(now()).toISOString(),
      };
      const copy: StoredDocument = { path: versionPath(kind, projectId, version), body: { ...body }, createdAt: original.createdAt };
      if ((await store.putDocumentOnce(copy)) === 'exists' && !isCopyOf(await store.getDocument(copy.path), original, projectId)) {
        throw new SignerError('carry_over_conflict', `${copy.path} holds another document than a copy of ${original.path}: nothing was overwritten`);
      }
      counts[kind] = version;
    }
  }
  return counts;
}

const isCopyOf = (found: StoredDocument | undefined, original: StoredDocument, projectId: string): boolean => {
  const from = (found?.body as Partial<CarriedBody> | undefined)?.carriedFrom;
  return found?.body['projectId'] === projectId && from?.path === original.path && isDeepStrictEqual(from.body, original.body);
};

/** A key's outcome: `absent` when the store has no key under the id (a wallet still pending: the key it gets will name its project). */
export type KeyCarried = CarriedKeys['keys'][number];

/**
 * Binds a key of an earlier release to the project the API's records give it: `projectId`, the
 * identity of the project whose database id was `legacyProjectId`. What the earlier release
 * recorded must agree (a database id in the record, or a first-use binding); a key already bound
 * is bound once, to one project. Refused otherwise, and the key stays as it was.
 */
export async function bindKey(store: KeyStore, keyId: string, projectId: string, legacyProjectId: string, now: () => number): Promise<KeyCarried> {
  const refused = (message: string): KeyCarried => ({ keyId, outcome: 'refused', code: 'wrong_project', message });
  const record = await store.get(keyId);
  if (!record) return { keyId, outcome: 'absent' };
  const bound = await boundProject(store, record);
  if (bound !== undefined) return bound === projectId ? { keyId, outcome: 'bound' } : refused('the key is bound to another project');
  if (record.projectId !== undefined && !PROJECT_ID.test(record.projectId) && record.projectId !== legacyProjectId)
    return refused(`the key was created for project ${record.projectId}, not ${legacyProjectId}`);
  if (record.projectId === undefined) {
    const firstUse = (await store.getDocument(legacyBindingPath(keyId)))?.body['projectId'];
    if (firstUse !== undefined && firstUse !== legacyProjectId)
      return refused(
        `an earlier release bound the key to project ${typeof firstUse === 'string' ? firstUse : JSON.stringify(firstUse)} at its first use, not to ${legacyProjectId}`,
      );
  }
  const binding: StoredDocument = { path: keyProjectPath(keyId), body: { keyId, projectId, legacyProjectId }, createdAt: new Date(now()).toISOString() };
  if ((await store.putDocumentOnce(binding)) === 'created') return { keyId, outcome: 'bound' };
  // Another request bound it meanwhile: the same project is the same answer.
  const other = (await store.getDocument(binding.path))?.body['projectId'];
  return other === projectId ? { keyId, outcome: 'bound' } : refused('the key is bound to another project');
}
