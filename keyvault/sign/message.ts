import { keccak_256 } from '@noble/hashes/sha3.js';
import { object, refuse, utf8Text } from './input.js';

/** personal_sign messages are at most 16 KiB (SIGNING.md). */
export const MESSAGE_MAX_BYTES = 16 * 1024;

export interface PersonalMessage {
  bytes: Uint8Array;
  /**
   * The text the signed bytes spell when they are UTF-8, whichever way the request wrote them
   * (text or `0x` hex); undefined when they are not. What policies read: a spelling signs the
   * same bytes as another, so it must not read differently.
   */
  text: string | undefined;
}

/** `{ message }`: UTF-8 text, or `0x` hex of whole bytes (read as bytes, as wallets do). */
export function parsePersonalSign(params: unknown): PersonalMessage {
  const p = object(params, '/params', ['message'], ['message']);
  const m = p['message'];
  if (typeof m !== 'string') return refuse('/params/message', 'must be a string: UTF-8 text or 0x hex');
  const bytes = /^0x([0-9a-fA-F]{2})*$/.test(m) ? Uint8Array.from(Buffer.from(m.slice(2), 'hex')) : new TextEncoder().encode(m);
  if (bytes.length > MESSAGE_MAX_BYTES) refuse('/params/message', `is over ${MESSAGE_MAX_BYTES} bytes`);
  return { bytes, text: utf8Text(bytes) };
}

/** EIP-191 version 0x45: keccak-256 of "\x19Ethereum Signed Message:\n" + length + message. */
export function personalDigest(bytes: Uint8Array): Uint8Array {
  const prefix = new TextEncoder().encode(`\x19Ethereum Signed Message:\n${bytes.length}`);
  return keccak_256(Buffer.concat([prefix, bytes]));
}
