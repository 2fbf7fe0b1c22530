import { keccak_256 } from '@noble/hashes/sha3.js';
import { LIMITS } from '../limits.js';
import { object, refuse, utf8Text } from './input.js';
import type { Meter } from './meter.js';

const MAX = LIMITS.messageBytes;

export interface PersonalMessage {
  bytes: Uint8Array;
  /**
   * The text the signed bytes spell when they are UTF-8, whichever way the request wrote them
   * (text or `0x` hex); undefined when they are not. What policies read: a spelling signs the
   * same bytes as another, so it must not read differently.
   */
  text: string | undefined;
}

/**
 * `{ message }`: UTF-8 text, or `0x` hex of whole bytes (read as bytes, as wallets do); at most
 * LIMITS.messageBytes, refused from the string's length before it is encoded when it must be over.
 */
export function parsePersonalSign(params: unknown): PersonalMessage {
  const p = object(params, '/params', ['message'], ['message']);
  const m = p['message'];
  if (typeof m !== 'string') return refuse('/params/message', 'must be a string: UTF-8 text or 0x hex');
  // Hex is two characters a byte; text at least one byte a UTF-16 unit.
  if (m.length > 2 + 2 * MAX) refuse('/params/message', `is over ${MAX} bytes`);
  const bytes = /^0x([0-9a-fA-F]{2})*$/.test(m) ? Uint8Array.from(Buffer.from(m.slice(2), 'hex')) : m.length > MAX ? undefined : new TextEncoder().encode(m);
  if (!bytes || bytes.length > MAX) return refuse('/params/message', `is over ${MAX} bytes`);
  return { bytes, text: utf8Text(bytes) };
}

/** EIP-191 version 0x45: keccak-256 of "\x19Ethereum Signed Message:\n" + length + message. */
export function personalDigest(bytes: Uint8Array, meter?: Meter): Uint8Array {
  const prefix = new TextEncoder().encode(`\x19Ethereum Signed Message:\n${bytes.length}`);
  const signed = Buffer.concat([prefix, bytes]);
  return meter ? meter.keccak(signed, '/params/message') : keccak_256(signed);
}
