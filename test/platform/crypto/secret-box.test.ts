import { createCipheriv, randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { dataKeyId, SecretBox, UnknownDataKeyError } from '../../../src/platform/crypto/secrets.js';
import { Cursors } from '../../../src/platform/http/pagination.js';

/** A value as releases before key ids sealed it. */
function sealV1(key: Buffer, plaintext: string, aad: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad));
  const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v1', iv, ct, cipher.getAuthTag()].map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.');
}

describe('SecretBox: a keyring of data keys', () => {
  const k1 = randomBytes(32);
  const k2 = randomBytes(32);

  it('seals under the current key, named by its id, and opens under any key it holds', () => {
    const old = new SecretBox(k1);
    const sealed = old.seal('whsec_x', 'aad');
    expect(sealed.split('.').slice(0, 2)).to.deep.equal(['v2', dataKeyId(k1)]);
    expect(old.isCurrent(sealed)).to.equal(true);
    const rotated = new SecretBox(k2, [k1]);
    expect(rotated.open(sealed, 'aad')).to.equal('whsec_x');
    expect(rotated.isCurrent(sealed)).to.equal(false);
    expect(rotated.isCurrent(rotated.seal('y', 'aad'))).to.equal(true);
    expect(() => rotated.open(sealed, 'other aad')).to.throw();
  });

  it('names the missing key when a value is under one it does not hold, and opens values sealed before key ids', () => {
    const sealed = new SecretBox(k1).seal('s', 'aad');
    expect(() => new SecretBox(k2).open(sealed, 'aad'))
      .to.throw(UnknownDataKeyError)
      .with.property('message')
      .that.includes(dataKeyId(k1))
      .and.includes('DATA_DECRYPTION_KEYS');
    const legacy = sealV1(k1, 'legacy', 'aad');
    expect(new SecretBox(k2, [k1]).open(legacy, 'aad')).to.equal('legacy');
    expect(() => new SecretBox(k2).open(legacy, 'aad')).to.throw(UnknownDataKeyError);
    expect(() => new SecretBox(k1, [k1])).to.throw(/twice/);
  });

  it('keeps list cursors valid across a rotation, and refuses those of a key it does not hold', () => {
    const before = new Cursors(new SecretBox(k1).cursorKeys());
    const cursor = before.encode('list', 42);
    expect(new Cursors(new SecretBox(k2, [k1]).cursorKeys()).page('list', { cursor }).afterId).to.equal(42);
    expect(() => new Cursors(new SecretBox(k2).cursorKeys()).page('list', { cursor })).to.throw(/not one this list returned/);
    expect(new Cursors(new SecretBox(k2, [k1]).cursorKeys()).encode('list', 42)).to.not.equal(cursor);
  });
});
