import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { getAddress } from 'ethers';
import { checksumAddress } from '../../../src/platform/eth/address.js';

/** ethers' reading of the contract's rule: lower or upper case as is, mixed case only with a valid checksum. */
function byEthers(text: string): string | undefined {
  if (!/^0x[0-9a-fA-F]{40}$/.test(text)) return undefined;
  const hex = text.slice(2);
  try {
    return hex === hex.toLowerCase() || hex === hex.toUpperCase() ? getAddress(`0x${hex.toLowerCase()}`) : getAddress(text);
  } catch {
    return undefined;
  }
}

describe('eth: addresses (EIP-55)', () => {
  it('agrees with ethers on 2,000 random addresses: lower, upper, checksummed, one letter flipped, malformed', () => {
    let flippedRefused = 0;
    for (let i = 0; i < 2_000; i++) {
      const lower = randomBytes(20).toString('hex');
      const checksummed = getAddress(`0x${lower}`);
      const letter = [...checksummed.slice(2)].findIndex((c) => /[a-fA-F]/.test(c));
      const flipped =
        letter < 0
          ? checksummed
          : `0x${checksummed.slice(2, 2 + letter)}${checksummed.charAt(2 + letter) === checksummed.charAt(2 + letter).toUpperCase() ? checksummed.charAt(2 + letter).toLowerCase() : checksummed.charAt(2 + letter).toUpperCase()}${checksummed.slice(3 + letter)}`;
      for (const text of [`0x${lower}`, `0x${lower.toUpperCase()}`, checksummed, flipped, `0x${lower.slice(1)}`, `0X${lower}`, `0x${lower}0`]) {
        expect(checksumAddress(text), text).to.equal(byEthers(text));
      }
      if (flipped !== checksummed && checksumAddress(flipped) === undefined) flippedRefused++;
    }
    // A flipped letter makes the case mixed and the checksum wrong, unless the result is all one case.
    expect(flippedRefused).to.be.greaterThan(1_900);
  });

  it('gives the published EIP-55 examples their checksum', () => {
    for (const example of [
      '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed',
      '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359',
      '0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB',
      '0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb',
    ]) {
      expect(checksumAddress(example.toLowerCase())).to.equal(example);
      expect(checksumAddress(example)).to.equal(example);
    }
  });
});
