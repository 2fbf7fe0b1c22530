import { PROJECT_ID } from './key-id.js';
import { keyProjectPath } from './stores/documents.js';
import type { KeyRecord, KeyStore } from './stores/types.js';

/**
 * The project a key signs for, by its identity: the one its record names (every key this release
 * creates), or, for a key of an earlier release, the one a carry-over bound it to from the API's
 * records. Undefined: the key signs for no project. What an earlier release recorded (a database
 * id in the record, a `bindings/<keyId>` made at first use) never decides: the carry-over checks
 * it against the API's records and nothing else reads it.
 */
export async function boundProject(store: KeyStore, record: KeyRecord): Promise<string | undefined> {
  const recorded = recordedProject(record);
  if (recorded !== undefined) return recorded;
  const bound = (await store.getDocument(keyProjectPath(record.keyId)))?.body['projectId'];
  return typeof bound === 'string' && PROJECT_ID.test(bound) ? bound : undefined;
}

/** The project a key's own record names by its identity (every key this release creates), without a read. */
export const recordedProject = (record: KeyRecord): string | undefined =>
  record.projectId !== undefined && PROJECT_ID.test(record.projectId) ? record.projectId : undefined;
