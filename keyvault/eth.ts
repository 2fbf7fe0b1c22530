import { secp256k1 } from '@noble/curves/secp256k1.js';
import { keccak_256 } from '@noble/hashes/sha3.js';

/** EIP-55: hex digits are upper-cased where the keccak-256 of the lower-case address has a nibble >= 8. */
export function toChecksumAddress(lowerHex40: string): string {
  const hash = keccak_256(new TextEncoder().encode(lowerHex40));
  let out = '0x';
  for (let i = 0; i < 40; i++) {
    const c = lowerHex40[i] ?? '';
    const nibble = ((hash[i >> 1] ?? 0) >> (i % 2 === 0 ? 4 : 0)) & 0x0f;
    out += nibble >= 8 ? c.toUpperCase() : c;
  }
  return out;
}

/** The address of an uncompressed secp256k1 public key (65 bytes, 0x04 prefix). */
export function addressOfPublicKey(uncompressed: Uint8Array): string {
  const hash = keccak_256(uncompressed.subarray(1));
  return toChecksumAddress(Buffer.from(hash.subarray(12)).toString('hex'));
}

export interface GeneratedKey {
  /** 32 bytes; the caller zeroes it when done. */
  secret: Uint8Array;
  publicKey: Uint8Array;
  address: string;
}

/** A new key from @noble/curves' CSPRNG-backed generator (crypto.getRandomValues). */
export function generateKey(): GeneratedKey {
  const secret = secp256k1.utils.randomSecretKey();
  const publicKey = secp256k1.getPublicKey(secret, false);
  return { secret, publicKey, address: addressOfPublicKey(publicKey) };
}
