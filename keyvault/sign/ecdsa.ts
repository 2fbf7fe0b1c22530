import { secp256k1 } from '@noble/curves/secp256k1.js';
import { signRecoverable } from 'tiny-secp256k1';

// A table of the base point's multiples for windows of 8 bits, made now on the signer's main thread
// (about 1 MB, tens of milliseconds at start): the public keys noble computes there take 15–20% less
// than with its default of 6.
secp256k1.Point.BASE.precompute(8, false);

export interface Signature {
  r: bigint;
  s: bigint;
  yParity: 0 | 1;
}

/**
 * Signs a 32-byte digest the signer computed itself, with libsecp256k1 (tiny-secp256k1, its
 * WebAssembly build: a quarter of noble's time a signature, docs/decisions.md): RFC 6979 nonces
 * and low-s (EIP-2), as libsecp256k1 always signs; the key is copied into its input buffer, which
 * it zeroes after each signature. The caller zeroes `secret`.
 */
export function signDigest(digest: Uint8Array, secret: Uint8Array): Signature {
  if (digest.length !== 32) throw new RangeError('a digest is 32 bytes');
  const { signature, recoveryId } = signRecoverable(digest, secret);
  if (recoveryId !== 0 && recoveryId !== 1) throw new Error('unexpected recovery id');
  const big = (b: Uint8Array) => BigInt(`0x${Buffer.from(b).toString('hex')}`);
  return { yParity: recoveryId, r: big(signature.subarray(0, 32)), s: big(signature.subarray(32, 64)) };
}

export const word = (n: bigint): Uint8Array => Uint8Array.from(Buffer.from(n.toString(16).padStart(64, '0'), 'hex'));

/** r ‖ s ‖ v with v = 27 + yParity: the 65-byte form of personal_sign and eth_signTypedData_v4. */
export function rsv(sig: Signature): string {
  return `0x${Buffer.from(word(sig.r)).toString('hex')}${Buffer.from(word(sig.s)).toString('hex')}${(27 + sig.yParity).toString(16)}`;
}
