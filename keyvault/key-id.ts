import { createHash } from 'node:crypto';

/** Namespace of our UUIDv5 key ids (a random UUID fixed once for this project). */
const NAMESPACE = Buffer.from('5b1d0a3e6c2f4f7e9a41c3d27e8b6f10', 'hex');

/**
 * RFC 9562 UUIDv5 of the API's request id: the same request id always lands on the same storage
 * path, so a retried request can never mint a second key.
 */
export function keyIdFor(requestId: string): string {
  const hash = createHash('sha1').update(NAMESPACE).update(requestId, 'utf8').digest();
  const b = hash.subarray(0, 16);
  b[6] = ((b[6] ?? 0) & 0x0f) | 0x50;
  b[8] = ((b[8] ?? 0) & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export const KEY_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
