/**
 * What the signing adapters (viem.ts, ethers.ts) share: the service's JSON forms of what the
 * libraries hand them. Quantities go as decimal strings (the service reads decimal, `0x` hex or
 * safe integers), bytes as `0x` hex.
 */

/** A value made JSON: bigints as decimal strings, byte arrays as `0x` hex, the rest as it is. */
export function toWire(value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (value instanceof Uint8Array) return bytesHex(value);
  if (Array.isArray(value)) return value.map(toWire);
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toWire(v)]));
  return value;
}

export function bytesHex(bytes: Uint8Array): `0x${string}` {
  return `0x${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/**
 * A `personal_sign` message as the libraries mean it: a string is its UTF-8 text, bytes are bytes.
 * The service reads a `0x…` string as hex bytes, so text that starts with `0x` is sent as the hex of
 * its UTF-8 (the same bytes are signed, and policies read the same text).
 */
export function messageParam(message: string | Uint8Array): string {
  if (typeof message !== 'string') return bytesHex(message);
  return /^0x/i.test(message) ? bytesHex(new TextEncoder().encode(message)) : message;
}

/** The service's answer to a signing call, checked for the field the caller needs. */
export function field<K extends string>(answer: unknown, key: K): `0x${string}` {
  const value = (answer as Record<string, unknown> | null)?.[key];
  if (typeof value !== 'string' || !value.startsWith('0x')) throw new Error(`custody: the signing answer has no ${key}`);
  return value as `0x${string}`;
}
