import { appendFileSync } from 'node:fs';
import path from 'node:path';
import { generateKey } from '../../keyvault/eth.js';
import type { KeyStore, StoredDocument } from '../../keyvault/stores/types.js';

/**
 * What signers of earlier releases left in their stores, written as they wrote it: keys without a
 * project or with the project's numeric id, first-use bindings, and policy and owner versions under
 * numeric project ids. The current signer writes none of these (it refuses to).
 */

/** A key record as an earlier release stored it: `projectId` the numeric id as a string, or none. */
export async function writeLegacyKey(store: KeyStore, keyId: string, requestId: string, projectId?: string): Promise<{ keyId: string; address: string }> {
  const key = generateKey();
  try {
    const context = Buffer.from(keyId, 'utf8').toString('base64');
    const ciphertext = await store.encrypt(context, key.secret);
    const written = await store.putOnce({
      keyId,
      address: key.address,
      publicKey: `0x${Buffer.from(key.publicKey).toString('hex')}`,
      ciphertext,
      transitKey: store.transitKeyName,
      context,
      createdAt: new Date().toISOString(),
      requestId,
      ...(projectId === undefined ? {} : { projectId }),
    });
    if (written !== 'created') throw new Error(`a key exists under ${keyId}`);
    return { keyId, address: key.address };
  } finally {
    key.secret.fill(0);
  }
}

/** Appends documents to a local store's documents.log as its record log writes them (no signer may be running on it). */
export function appendLegacyDocuments(dataDir: string, documents: StoredDocument[]): void {
  appendFileSync(path.join(dataDir, 'documents.log'), documents.map((d) => `${JSON.stringify(d)}\n`).join(''), { mode: 0o600 });
}

/** A policy or owner version as earlier releases stored it, under the project's numeric id. */
export const legacyVersion = (kind: 'policies' | 'owners', projectId: number, version: number, document: unknown, author?: string): StoredDocument => ({
  path: `${kind}/${projectId}/v${version}`,
  body: { projectId: String(projectId), version, document, ...(author === undefined ? {} : { author }) },
  createdAt: new Date(Date.UTC(2026, 10, 20, 12, version)).toISOString(),
});

/** A first-use binding as earlier releases made it when a key without a project first signed. */
export const legacyBinding = (keyId: string, projectId: number): StoredDocument => ({
  path: `bindings/${keyId}`,
  body: { keyId, projectId: String(projectId) },
  createdAt: new Date(Date.UTC(2026, 10, 20, 13)).toISOString(),
});
