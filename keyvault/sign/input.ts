import { SignerError } from '../errors.js';
import { toChecksumAddress } from '../eth.js';

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

/** An object with only `allowed` keys; `required` among them must be present. */
export function object(v: unknown, path: string, allowed: readonly string[], required: readonly string[] = []): Json {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return refuse(path, 'must be an object');
  const o = v as Json;
  const unknown = Object.keys(o).filter((k) => !allowed.includes(k));
  if (unknown.length > 0) refuse(path, `has unknown fields: ${unknown.join(', ')}`);
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

/** `0x` hex of whole bytes, at most `maxBytes`. */
export function hexBytes(v: unknown, path: string, maxBytes: number): Uint8Array {
  if (typeof v !== 'string' || !/^0x([0-9a-fA-F]{2})*$/.test(v)) return refuse(path, 'must be 0x hex of whole bytes');
  if ((v.length - 2) / 2 > maxBytes) refuse(path, `is over ${maxBytes} bytes`);
  return Uint8Array.from(Buffer.from(v.slice(2), 'hex'));
}

/** A 20-byte address (any case; a mixed-case one must carry a valid EIP-55 checksum). Returned EIP-55. */
export function address(v: unknown, path: string): string {
  if (typeof v !== 'string' || !/^0x[0-9a-fA-F]{40}$/.test(v)) return refuse(path, 'must be a 20-byte 0x address');
  const lower = v.slice(2).toLowerCase();
  const checksummed = toChecksumAddress(lower);
  const mixed = v.slice(2) !== lower && v.slice(2) !== lower.toUpperCase();
  if (mixed && checksummed !== v) refuse(path, 'has an invalid EIP-55 checksum');
  return checksummed;
}

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
