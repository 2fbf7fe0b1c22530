import { SignerError } from '../errors.js';
import { toChecksumAddress } from '../eth.js';
import { LIMITS } from '../limits.js';

/**
 * Reading an operation's JSON strictly: every refusal names the field (a JSON pointer) and says
 * what was expected. Nothing here guesses: unknown fields, wrong types and out-of-range
 * quantities are refused, never coerced.
 */
export const refuse = (path: string, message: string): never => {
  throw new SignerError('invalid_operation', `${path || '/'} ${message}`);
};

export type Json = Record<string, unknown>;

export const UINT256_MAX = (1n << 256n) - 1n;
export const UINT64_MAX = (1n << 64n) - 1n;

/** Names a refusal lists, each cut short: an answer never grows with what was sent. */
export const someNames = (names: readonly string[]): string => {
  const shown = names.slice(0, LIMITS.refusal.names).map((n) => (n.length > 64 ? `${n.slice(0, 64)}…` : n));
  return names.length > shown.length ? `${shown.join(', ')} and ${names.length - shown.length} more` : shown.join(', ');
};

/**
 * An object with only `allowed` keys; `required` among them must be present. `allowed` may be a
 * Set (a large list: one look-up per key). The walk stops at the sixth unknown name: a refusal
 * names a few, so an object of many thousand keys costs no more to refuse than a small one.
 */
export function object(v: unknown, path: string, allowed: readonly string[] | ReadonlySet<string>, required: readonly string[] = []): Json {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return refuse(path, 'must be an object');
  const o = v as Json;
  const has = allowed instanceof Set ? (k: string) => allowed.has(k) : (k: string) => (allowed as readonly string[]).includes(k);
  const unknown: string[] = [];
  let more = false;
  for (const k in o) {
    if (has(k)) continue;
    if (unknown.length === LIMITS.refusal.names) {
      more = true;
      break;
    }
    unknown.push(k);
  }
  if (unknown.length > 0) refuse(path, `has unknown fields: ${someNames(unknown)}${more ? ' and more' : ''}`);
  for (const k of required) if (o[k] === undefined) refuse(`${path}/${k}`, 'is required');
  return o;
}

const DECIMAL = /^(0|[1-9][0-9]{0,77})$/;
const HEX_QUANTITY = /^0x[0-9a-fA-F]{1,64}$/;

/**
 * A quantity: a decimal string, `0x` hex, or a non-negative safe integer; at most `max`.
 * Hex may carry leading zeros (wallets send `0x01`); a decimal may not (it would read as octal elsewhere).
 */
export function quantity(v: unknown, path: string, max = UINT256_MAX): bigint {
  let n: bigint;
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v) || v < 0) return refuse(path, 'must be a non-negative integer (as a decimal or 0x hex string beyond 2^53)');
    n = BigInt(v);
  } else if (typeof v === 'string' && (DECIMAL.test(v) || HEX_QUANTITY.test(v))) {
    n = BigInt(v);
  } else {
    return refuse(path, 'must be a quantity: a decimal string, 0x hex or a non-negative integer');
  }
  if (n > max) refuse(path, `is above ${max === UINT64_MAX ? '2^64 - 1' : '2^256 - 1'}`);
  return n;
}

/** `0x` hex of whole bytes, at most `maxBytes` (the length is checked before the digits are read). */
export function hexBytes(v: unknown, path: string, maxBytes: number): Uint8Array {
  if (typeof v === 'string' && (v.length - 2) / 2 > maxBytes) refuse(path, `is over ${maxBytes} bytes`);
  if (typeof v !== 'string' || !/^0x([0-9a-fA-F]{2})*$/.test(v)) return refuse(path, 'must be 0x hex of whole bytes');
  return Uint8Array.from(Buffer.from(v.slice(2), 'hex'));
}

/**
 * A 20-byte address (any case; a mixed-case one must carry a valid EIP-55 checksum), returned in
 * lower case: only a mixed-case address costs a hash, to check its checksum.
 */
export function lowerAddress(v: unknown, path: string): string {
  if (typeof v !== 'string' || !/^0x[0-9a-fA-F]{40}$/.test(v)) return refuse(path, 'must be a 20-byte 0x address');
  const digits = v.slice(2);
  const lower = digits.toLowerCase();
  if (digits !== lower && digits !== lower.toUpperCase() && toChecksumAddress(lower) !== v) refuse(path, 'has an invalid EIP-55 checksum');
  return `0x${lower}`;
}

/** A 20-byte address as lowerAddress reads it, returned EIP-55. */
export const address = (v: unknown, path: string): string => toChecksumAddress(lowerAddress(v, path).slice(2));

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The text UTF-8 bytes spell, or undefined when they are not UTF-8 (overlong forms, surrogates and
 * stray continuation bytes included). A leading byte-order mark is kept: it is signed too.
 */
export function utf8Text(bytes: Uint8Array): string | undefined {
  try {
    return UTF8.decode(bytes);
  } catch {
    return undefined;
  }
}

/** A string as the UTF-8 hashed for it reads back: TextEncoder writes an unpaired surrogate as U+FFFD. */
export const signedText = (s: string): string => utf8Text(new TextEncoder().encode(s)) ?? s;

export const hex = (b: Uint8Array): string => `0x${Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex')}`;
export const quantityHex = (n: bigint): string => `0x${n.toString(16)}`;
