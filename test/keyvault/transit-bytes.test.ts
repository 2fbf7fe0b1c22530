import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { base64Into, base64Length, decodeBase64, encryptRequestBody, takePlaintexts } from '../../keyvault/vault/transit-bytes.js';

describe('keyvault: transit key bytes as bytes (never a JavaScript string)', () => {
  it('encodes and decodes base64 as Buffer does, for every length and remainder', () => {
    for (let n = 0; n <= 70; n++) {
      const bytes = randomBytes(n);
      const out = Buffer.alloc(base64Length(n));
      expect(base64Into(bytes, out, 0)).to.equal(out.length);
      expect(out.toString('ascii'), `length ${n}`).to.equal(bytes.toString('base64'));
      expect(decodeBase64(out, 0, out.length)?.equals(bytes), `length ${n}`).to.equal(true);
    }
    expect(decodeBase64(Buffer.from('ab$d'), 0, 4)).to.equal(undefined);
    expect(decodeBase64(Buffer.from('abc'), 0, 3)).to.equal(undefined);
  });

  it('assembles the encrypt request as JSON bytes with the plaintexts in base64', () => {
    const items = [
      { context: Buffer.from('key-1').toString('base64'), plaintext: randomBytes(32) },
      { context: Buffer.from('key-2').toString('base64'), plaintext: randomBytes(32) },
    ];
    const body = encryptRequestBody(items);
    expect(JSON.parse(body.toString('utf8'))).to.deep.equal({
      batch_input: items.map((i) => ({ context: i.context, plaintext: Buffer.from(i.plaintext).toString('base64') })),
    });
  });

  it('takes the plaintexts out of a decrypt answer, in order, and leaves JSON without them', () => {
    const keys = [randomBytes(32), randomBytes(32)];
    const answer = Buffer.from(
      JSON.stringify({
        request_id: 'r',
        data: {
          batch_results: [
            { plaintext: keys[0]?.toString('base64') },
            { error: 'cipher: message authentication failed' },
            { plaintext: keys[1]?.toString('base64') },
          ],
        },
      }),
    );
    const taken = takePlaintexts(answer);
    expect(taken.map((b) => b.toString('hex'))).to.deep.equal(keys.map((k) => k.toString('hex')));
    const rest = answer.toString('utf8');
    for (const k of keys) expect(rest).not.to.include(k.toString('base64'));
    const parsed = JSON.parse(rest) as { data: { batch_results: Array<Record<string, string>> } };
    expect(parsed.data.batch_results[1]).to.deep.equal({ error: 'cipher: message authentication failed' });
    expect(parsed.data.batch_results[0]?.['plaintext']).to.match(/^A+$/);
  });
});
