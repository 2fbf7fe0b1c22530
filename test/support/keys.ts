import { createHash, randomUUID } from 'node:crypto';
import { projectUid } from '../../src/platform/signer/client.js';

/** The deployment the signer-level suites present (each of their signers has a store of its own). */
export const TEST_DEPLOYMENT = randomUUID();

/**
 * A UUIDv4-shaped key id fixed by a name, so a suite can ask for "the same key" again. Only
 * tests do this: the API chooses every key id at random.
 */
export function keyIdOf(name: string): string {
  const b = createHash('sha256').update(`${TEST_DEPLOYMENT}:${name}`).digest().subarray(0, 16);
  b[6] = ((b[6] ?? 0) & 0x0f) | 0x40;
  b[8] = ((b[8] ?? 0) & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** The project the signer-level suites create keys for, unless they name one: a project uid as the API sends it. */
export const TEST_PROJECT = projectUid(randomUUID());

/** The body of `POST /v1/keys` for the key named `name`, as the API sends it. */
export function keyRequest(
  name: string,
  projectId: string = TEST_PROJECT,
): { keyId: string; requestId: string; purpose: 'wallet'; deploymentId: string; projectId: string } {
  return { keyId: keyIdOf(name), requestId: name, purpose: 'wallet', deploymentId: TEST_DEPLOYMENT, projectId };
}
