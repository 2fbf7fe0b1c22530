import { expect } from 'chai';
import { computeAddress, getAddress } from 'ethers';
import { addressOfPublicKey, generateKey, toChecksumAddress } from '../../keyvault/eth.js';

// The test vectors of EIP-55 itself.
const EIP55_VECTORS = [
  '0x52908400098527886E0F7030069857D2E4169EE7',
  '0x8617E340B3D01FA5F11F306F4090FD50E238070D',
  '0xde709f2102306220921060314715629080e2fb77',
  '0x27b1fdb04752bbc536007a920d24acb045561c26',
  '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed',
  '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359',
  '0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB',
  '0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb',
];

describe('keyvault: keys and addresses', () => {
  it('checksums addresses as EIP-55 says (its test vectors)', () => {
    for (const vector of EIP55_VECTORS) {
      expect(toChecksumAddress(vector.slice(2).toLowerCase())).to.equal(vector);
    }
  });

  it('derives the same EIP-55 address as ethers for 200 random keys', () => {
    for (let i = 0; i < 200; i++) {
      const key = generateKey();
      const expected = computeAddress(`0x${Buffer.from(key.publicKey).toString('hex')}`);
      expect(key.address).to.equal(expected);
      expect(getAddress(key.address)).to.equal(key.address);
      expect(addressOfPublicKey(key.publicKey)).to.equal(key.address);
      expect(key.secret).to.have.length(32);
    }
  });
});
