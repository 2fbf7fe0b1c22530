import { keccak_256 } from '@noble/hashes/sha3.js';

const HEX_ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/** EIP-55: a hex digit is upper-cased where the keccak-256 of the lower-case hex has a nibble of 8 or more. */
function eip55(lowerHex: string): string {
  const hash = keccak_256(Buffer.from(lowerHex, 'latin1'));
  let out = '0x';
  for (let i = 0; i < 40; i++) {
    const byte = hash[i >> 1] ?? 0;
    const nibble = i % 2 === 0 ? byte >> 4 : byte & 0xf;
    const c = lowerHex.charAt(i);
    out += nibble >= 8 ? c.toUpperCase() : c;
  }
  return out;
}

/**
 * docs/interface.md section 7: all-lower-case or all-upper-case hex is taken as is; mixed case must
 * carry a valid EIP-55 checksum. Returns the EIP-55 form, or undefined when the text is not an
 * acceptable address. (keccak from @noble/hashes directly: ethers' getAddress cost twice as much,
 * and a 1,000-item issue checks 1,000 addresses in one turn of the event loop.)
 */
export function checksumAddress(text: string): string | undefined {
  if (!HEX_ADDRESS.test(text)) return undefined;
  const hex = text.slice(2);
  const lower = hex.toLowerCase();
  const checksummed = eip55(lower);
  if (hex === lower || hex === hex.toUpperCase()) return checksummed;
  return checksummed === text ? checksummed : undefined;
}

export const ADDRESS_RULE = 'must be 0x and 40 hex digits, all lower-case, all upper-case or with a valid EIP-55 checksum';
