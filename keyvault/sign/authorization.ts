import { keccak_256 } from '@noble/hashes/sha3.js';
import { address, object, quantity, UINT256_MAX, UINT64_MAX } from './input.js';
import { integerBytes, rlpEncode } from './rlp.js';

export interface Authorization {
  chainId: bigint;
  /** The delegate contract, EIP-55. */
  address: string;
  nonce: bigint;
}

/** `{ chainId, address, nonce }` (EIP-7702); chainId 0 (any chain) is read here and left to the policy. */
export function parseAuthorization(params: unknown): Authorization {
  const p = object(params, '/params', ['chainId', 'address', 'nonce'], ['chainId', 'address', 'nonce']);
  return {
    chainId: quantity(p['chainId'], '/params/chainId', UINT256_MAX),
    address: address(p['address'], '/params/address'),
    nonce: quantity(p['nonce'], '/params/nonce', UINT64_MAX),
  };
}

/** keccak-256(0x05 ‖ rlp([chainId, address, nonce])). */
export function authorizationDigest(a: Authorization): Uint8Array {
  const tuple = rlpEncode([integerBytes(a.chainId), Buffer.from(a.address.slice(2), 'hex'), integerBytes(a.nonce)]);
  return keccak_256(Buffer.concat([Uint8Array.of(0x05), tuple]));
}
