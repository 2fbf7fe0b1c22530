import { getAddress } from 'ethers/address';

const HEX_ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/**
 * CONTRACT.md section 7: all-lower-case or all-upper-case hex is taken as is; mixed case must
 * carry a valid EIP-55 checksum. Returns the EIP-55 form, or undefined when the text is not an
 * acceptable address.
 */
export function checksumAddress(text: string): string | undefined {
  if (!HEX_ADDRESS.test(text)) return undefined;
  const hex = text.slice(2);
  if (hex === hex.toLowerCase() || hex === hex.toUpperCase()) return getAddress(`0x${hex.toLowerCase()}`);
  try {
    return getAddress(text);
  } catch {
    return undefined;
  }
}

export const ADDRESS_RULE = 'must be 0x and 40 hex digits, all lower-case, all upper-case or with a valid EIP-55 checksum';
