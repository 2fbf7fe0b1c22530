import { expect } from 'chai';
import * as ethers from 'ethers';
import fc from 'fast-check';
import * as viem from 'viem';
import { hashAuthorization, recoverAuthorizationAddress } from 'viem/utils';
import { secp256k1 } from '@noble/curves/secp256k1.js';
import { addressOfPublicKey } from '../../../keyvault/eth.js';
import { parseOperation, signOperation } from '../../../keyvault/sign/operation.js';
import { signDigest } from '../../../keyvault/sign/ecdsa.js';

/**
 * Every signature the signer's operations make, checked by two implementations that share no
 * code with it or with each other: ethers and viem recover the wallet's address, parse the
 * signed transactions, and compute the same typed-data hashes. At least 200 generated operations
 * per method, then the published vectors.
 */
const RUNS = 200;
const N = secp256k1.Point.CURVE().n;

const secretKey = fc.uint8Array({ minLength: 32, maxLength: 32 }).filter((k) => secp256k1.utils.isValidSecretKey(k));
const addressOf = (secret: Uint8Array) => addressOfPublicKey(secp256k1.getPublicKey(secret, false));
const hexOf = (b: Uint8Array) => `0x${Buffer.from(b).toString('hex')}` as const;
const sign = async (secret: Uint8Array, body: unknown) => {
  const op = parseOperation(body);
  const { answer, digest } = signOperation(op, Uint8Array.from(secret));
  return { op, digest, answer: await answer };
};
const lowS = (s: string | bigint) => BigInt(s) <= N / 2n;
const anAddress = fc.uint8Array({ minLength: 20, maxLength: 20 }).map((b) => ethers.getAddress(hexOf(b)));
const uint = (bits: number) => fc.bigInt({ min: 0n, max: (1n << BigInt(bits)) - 1n });
/** A quantity as callers send it: decimal, hex, or a number when small. */
const asQuantity = (n: bigint, form: number) =>
  form === 0 ? n.toString() : form === 1 || n > BigInt(Number.MAX_SAFE_INTEGER) ? `0x${n.toString(16)}` : Number(n);

describe('signer operations: conformance with ethers and viem', function () {
  this.timeout(120_000);

  it(`signs a digest as noble does (RFC 6979 nonces, low s), byte for byte: ${RUNS} keys and digests, the curve's edges among them`, () => {
    const edge = (hex: string) => Uint8Array.from(Buffer.from(hex.padStart(64, '0'), 'hex'));
    const keys = [edge('1'), edge((N - 1n).toString(16)), edge((N / 2n).toString(16))];
    const digests = [edge('0'), edge('f'.repeat(64)), edge((N - 1n).toString(16))];
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), fc.uint8Array({ minLength: 48, maxLength: 48 }), fc.nat(8), (digest, seed, pick) => {
        const secret = pick < 3 ? keys[pick]! : secp256k1.utils.randomSecretKey(seed);
        const d = pick >= 3 && pick < 6 ? digests[pick - 3]! : digest;
        const ours = signDigest(d, secret);
        const noble = secp256k1.sign(d, secret, { prehash: false, lowS: true, extraEntropy: false, format: 'recovered' });
        expect(ours.yParity).to.equal(noble[0]);
        expect(ours.r).to.equal(BigInt(`0x${Buffer.from(noble.subarray(1, 33)).toString('hex')}`));
        expect(ours.s).to.equal(BigInt(`0x${Buffer.from(noble.subarray(33, 65)).toString('hex')}`));
        expect(lowS(ours.s)).to.equal(true);
      }),
      { numRuns: RUNS },
    );
  });

  it(`personal_sign: ${RUNS} messages (text and hex bytes), recovered by both`, async () => {
    const message = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 300 }),
      fc.uint8Array({ maxLength: 300 }).map((b) => hexOf(b)),
    );
    await fc.assert(
      fc.asyncProperty(secretKey, message, async (secret, m) => {
        const { answer } = await sign(secret, { method: 'personal_sign', params: { message: m } });
        const signature = answer['signature'] as `0x${string}`;
        const isHex = /^0x([0-9a-fA-F]{2})*$/.test(m);
        const bytes = isHex ? ethers.getBytes(m) : ethers.toUtf8Bytes(m);
        expect(ethers.verifyMessage(bytes, signature)).to.equal(addressOf(secret));
        expect(await viem.recoverMessageAddress({ message: { raw: bytes }, signature })).to.equal(addressOf(secret));
        expect(lowS(`0x${signature.slice(66, 130)}`)).to.equal(true);
        expect([27, 28]).to.include(parseInt(signature.slice(130), 16));
      }),
      { numRuns: RUNS },
    );
  });

  it(`eth_signTypedData_v4: ${RUNS} generated types and values, hashed alike by both and recovered by both`, async () => {
    await fc.assert(
      fc.asyncProperty(secretKey, typedDataCase, async (secret, c) => {
        const { answer, digest } = await sign(secret, { method: 'eth_signTypedData_v4', params: { typedData: c.json } });
        const signature = answer['signature'] as `0x${string}`;
        // ethers derives the domain's type itself and takes the struct types alone.
        const structs = Object.fromEntries(Object.entries(c.types).filter(([name]) => name !== 'EIP712Domain'));
        expect(digest, 'ethers').to.equal(ethers.TypedDataEncoder.hash(c.domainForEthers, structs, c.valueForEthers));
        // Types generated at run time: viem's parameter types are for literals known when compiling.
        const forViem = { domain: c.domainForViem, types: c.types, primaryType: c.primaryType, message: c.valueForViem } as unknown as viem.TypedDataDefinition;
        expect(digest, 'viem').to.equal(viem.hashTypedData(forViem));
        expect(ethers.verifyTypedData(c.domainForEthers, structs, c.valueForEthers, signature)).to.equal(addressOf(secret));
        expect(await viem.recoverTypedDataAddress({ ...forViem, signature })).to.equal(addressOf(secret));
      }),
      { numRuns: RUNS },
    );
  });

  for (const type of [0, 1, 2] as const) {
    it(`eth_signTransaction type ${type}: ${RUNS} transactions parsed by both, their sender recovered by both`, async () => {
      await fc.assert(
        fc.asyncProperty(secretKey, transactionCase(type), async (secret, c) => {
          const { answer, digest } = await sign(secret, { method: 'eth_signTransaction', params: { transaction: c.json } });
          const signed = answer['signedTransaction'] as `0x${string}`;
          const parsed = ethers.Transaction.from(signed);
          expect(parsed.from).to.equal(addressOf(secret));
          expect(parsed.type).to.equal(type);
          expect(parsed.chainId).to.equal(c.chainId);
          expect(parsed.nonce).to.equal(Number(c.nonce));
          expect(parsed.to).to.equal(c.to ?? null);
          expect(parsed.value).to.equal(c.value);
          expect(parsed.data).to.equal(c.data);
          expect(parsed.unsignedHash).to.equal(digest);
          expect(answer['hash']).to.equal(parsed.hash);
          expect(lowS(parsed.signature?.s ?? '0x0')).to.equal(true);
          if (type === 0) expect(parsed.signature?.networkV).to.equal(c.chainId * 2n + 35n + BigInt(parsed.signature?.yParity ?? 0));
          const v = viem.parseTransaction(signed);
          expect(v.chainId).to.equal(Number(c.chainId));
          expect(v.value ?? 0n).to.equal(c.value);
          expect(await viem.recoverTransactionAddress({ serializedTransaction: signed as viem.TransactionSerialized })).to.equal(addressOf(secret));
          expect(viem.keccak256(signed)).to.equal(answer['hash']);
        }),
        { numRuns: RUNS },
      );
    });
  }

  it(`eth_signAuthorization: ${RUNS} EIP-7702 tuples recovered by both`, async () => {
    await fc.assert(
      // viem takes the chain id and nonce as JavaScript numbers: both stay below 2^53 here.
      fc.asyncProperty(secretKey, uint(53), anAddress, uint(53), fc.nat(2), async (secret, chainId, to, nonce, form) => {
        const delegate = to as `0x${string}`;
        const { answer, digest } = await sign(secret, {
          method: 'eth_signAuthorization',
          params: { chainId: asQuantity(chainId, form), address: delegate.toLowerCase(), nonce: asQuantity(nonce, form) },
        });
        const a = answer['authorization'] as { chainId: string; address: `0x${string}`; nonce: string; yParity: string; r: `0x${string}`; s: `0x${string}` };
        expect(a.address).to.equal(delegate);
        expect(BigInt(a.chainId)).to.equal(chainId);
        expect(digest).to.equal(hashAuthorization({ chainId: Number(chainId), address: delegate, nonce: Number(nonce) }));
        const signature = { r: a.r, s: a.s, yParity: Number(a.yParity) as 0 | 1 };
        expect(await recoverAuthorizationAddress({ authorization: { chainId: Number(chainId), address: delegate, nonce: Number(nonce) }, signature })).to.equal(
          addressOf(secret),
        );
        expect(ethers.verifyAuthorization({ address: delegate, nonce, chainId }, signature)).to.equal(addressOf(secret));
        expect(lowS(a.s)).to.equal(true);
      }),
      { numRuns: RUNS },
    );
  });

  describe('published vectors', () => {
    const key = (hex: string) => Uint8Array.from(Buffer.from(hex.replace(/^0x/, ''), 'hex'));

    it("EIP-712's own example (Mail, the key keccak256('cow'))", async () => {
      const mail = {
        types: {
          EIP712Domain: [
            { name: 'name', type: 'string' },
            { name: 'version', type: 'string' },
            { name: 'chainId', type: 'uint256' },
            { name: 'verifyingContract', type: 'address' },
          ],
          Person: [
            { name: 'name', type: 'string' },
            { name: 'wallet', type: 'address' },
          ],
          Mail: [
            { name: 'from', type: 'Person' },
            { name: 'to', type: 'Person' },
            { name: 'contents', type: 'string' },
          ],
        },
        primaryType: 'Mail',
        domain: { name: 'Ether Mail', version: '1', chainId: 1, verifyingContract: '0xCcCCccccCCCCcCCCCCCcCcCccCcCCCcCcccccccC' },
        message: {
          from: { name: 'Cow', wallet: '0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826' },
          to: { name: 'Bob', wallet: '0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB' },
          contents: 'Hello, Bob!',
        },
      };
      const secret = ethers.getBytes(ethers.keccak256(ethers.toUtf8Bytes('cow')));
      const { answer, digest } = await sign(secret, { method: 'eth_signTypedData_v4', params: { typedData: mail } });
      expect(digest).to.equal('0xbe609aee343fb3c4b28e1df9e632fca64fcfaede20f02e86244efddf30957bd2');
      const sig = answer['signature'] as string;
      expect(sig.slice(0, 66)).to.equal('0x4355c47d63924e8a72e509b65029052eb6c299d53a04e167c5775fd466751c9d');
      expect(`0x${sig.slice(66, 130)}`).to.equal('0x07299936d304c153f6443dfa05f40ff007d72911b6f72307f996231605b91562');
      expect(parseInt(sig.slice(130), 16)).to.equal(28);
    });

    it("EIP-155's example transaction (nonce 9, chain 1, the key 0x4646…46)", async () => {
      const { answer, digest } = await sign(key('46'.repeat(32)), {
        method: 'eth_signTransaction',
        params: {
          transaction: {
            type: 0,
            chainId: 1,
            nonce: 9,
            gasPrice: '20000000000',
            gas: 21000,
            to: '0x3535353535353535353535353535353535353535',
            value: '1000000000000000000',
            data: '0x',
          },
        },
      });
      expect(digest).to.equal('0xdaf5a779ae972f972197303d7b574746c7ef83eadac0f2791ad23db92e4c8e53');
      expect(answer['signedTransaction']).to.equal(
        '0xf86c098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a76400008025a028ef61340bd939bc2195fe537567866003e1a15d3c71ff63e1590620aa636276a067cbe9d8997f761aecb703304b3800ccf555c9f3dc64214b297fb1966a3b6d83',
      );
    });

    it("personal_sign of web3.js's documented example ('Some data')", async () => {
      const { answer, digest } = await sign(key('4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318'), {
        method: 'personal_sign',
        params: { message: 'Some data' },
      });
      expect(digest).to.equal('0x1da44b586eb0729ff70a73c326926f6ed5a25f5b056e7f47fbc6e58d86871655');
      expect(answer['signature']).to.equal(
        '0xb91467e570a6466aa9e9876cbcd013baba02900b8979d43fe208a4a4f339f5fd6007e74cd82e037b800186422fc2da167c747ef045e5d18a5f5d4300f8e1a0291c',
      );
    });
  });
});

// ---- generators ----------------------------------------------------------------------------

interface Field {
  name: string;
  type: string;
}
type Gen = fc.Arbitrary<{ json: unknown; ethers: unknown; viem: unknown }>;

/** A value of an atomic EIP-712 type, as JSON for the signer, for ethers and for viem. */
function atomicValue(type: string): Gen {
  const same = <T>(a: fc.Arbitrary<T>) => a.map((v) => ({ json: v, ethers: v, viem: v }));
  if (type === 'string') return same(fc.string({ unit: 'grapheme', maxLength: 40 }));
  if (type === 'bool') return same(fc.boolean());
  if (type === 'address') return same(anAddress);
  if (type === 'bytes') return same(fc.uint8Array({ maxLength: 70 }).map(hexOf));
  const bytesN = /^bytes(\d+)$/.exec(type);
  if (bytesN) return same(fc.uint8Array({ minLength: Number(bytesN[1]), maxLength: Number(bytesN[1]) }).map(hexOf));
  const sized = /^(u?int)(\d+)$/.exec(type);
  const bits = BigInt(sized?.[2] ?? 256);
  const range = sized?.[1] === 'uint' ? { min: 0n, max: (1n << bits) - 1n } : { min: -(1n << (bits - 1n)), max: (1n << (bits - 1n)) - 1n };
  return fc.tuple(fc.bigInt(range), fc.nat(2)).map(([n, form]) => ({
    json: n < 0n ? (form === 2 && n >= -9007199254740991n ? Number(n) : n.toString()) : asQuantity(n, form),
    ethers: n,
    viem: n,
  }));
}

const atomicType = fc.oneof(
  fc.constantFrom('string', 'bool', 'address', 'bytes'),
  fc.integer({ min: 1, max: 32 }).map((n) => `bytes${n}`),
  fc.integer({ min: 1, max: 32 }).map((n) => `uint${n * 8}`),
  fc.integer({ min: 1, max: 32 }).map((n) => `int${n * 8}`),
);
const fieldName = fc.stringMatching(/^[a-z][a-zA-Z0-9_]{0,11}$/);

function valueOf(type: string, types: Record<string, Field[]>): Gen {
  const array = /^(.*)\[(\d*)\]$/.exec(type);
  if (array) {
    const [, inner = '', size = ''] = array;
    const n = size === '' ? undefined : Number(size);
    return fc
      .array(valueOf(inner, types), { minLength: n ?? 0, maxLength: n ?? 3 })
      .map((vs) => ({ json: vs.map((v) => v.json), ethers: vs.map((v) => v.ethers), viem: vs.map((v) => v.viem) }));
  }
  const struct = types[type];
  if (struct) return structValue(struct, types);
  return atomicValue(type);
}

function structValue(fields: Field[], types: Record<string, Field[]>): Gen {
  return fc.tuple(...fields.map((f) => valueOf(f.type, types))).map((vs) => {
    const pick = (k: 'json' | 'ethers' | 'viem') => Object.fromEntries(fields.map((f, i) => [f.name, vs[i]?.[k]]));
    return { json: pick('json'), ethers: pick('ethers'), viem: pick('viem') };
  });
}

const uniqueFields = (types: fc.Arbitrary<string>, max: number) =>
  fc.uniqueArray(fc.tuple(fieldName, types), { minLength: 1, maxLength: max, selector: ([n]) => n }).map((fs) => fs.map(([name, type]) => ({ name, type })));

const withArrays = (t: fc.Arbitrary<string>) => fc.tuple(t, fc.constantFrom('', '', '[]', '[2]')).map(([base, suffix]) => `${base}${suffix}`);

const typedDataCase = fc
  .record({
    inner: uniqueFields(withArrays(atomicType), 3),
    outer: uniqueFields(withArrays(fc.oneof(atomicType, fc.constant('Inner'))), 5),
    domainKeys: fc.subarray(['name', 'version', 'chainId', 'verifyingContract', 'salt'], { minLength: 1 }),
    declareDomain: fc.boolean(),
  })
  .chain(({ inner, outer, domainKeys, declareDomain }) => {
    const usesInner = outer.some((f) => f.type.startsWith('Inner'));
    const types: Record<string, Field[]> = { Outer: outer, ...(usesInner ? { Inner: inner } : {}) };
    const domainFields: Field[] = [
      { name: 'name', type: 'string' },
      { name: 'version', type: 'string' },
      { name: 'chainId', type: 'uint256' },
      { name: 'verifyingContract', type: 'address' },
      { name: 'salt', type: 'bytes32' },
    ].filter((f) => domainKeys.includes(f.name));
    return fc.tuple(structValue(outer, types), structValue(domainFields, {})).map(([value, domain]) => {
      const declared = { EIP712Domain: domainFields, ...types };
      return {
        types: declared,
        primaryType: 'Outer',
        json: { types: declareDomain ? declared : types, primaryType: 'Outer', domain: domain.json, message: value.json },
        domainForEthers: domain.ethers as ethers.TypedDataDomain,
        domainForViem: domain.viem,
        valueForEthers: value.ethers as Record<string, unknown>,
        valueForViem: value.viem,
      };
    });
  });

function transactionCase(type: 0 | 1 | 2) {
  const accessList = fc.array(
    fc.record({ address: anAddress, storageKeys: fc.array(fc.uint8Array({ minLength: 32, maxLength: 32 }).map(hexOf), { maxLength: 3 }) }),
    {
      maxLength: 3,
    },
  );
  return fc
    .record({
      chainId: fc.bigInt({ min: 1n, max: (1n << 32n) - 1n }),
      nonce: uint(32),
      gas: uint(32),
      fee: uint(80),
      tip: uint(80),
      to: fc.option(anAddress, { nil: undefined }),
      value: uint(256),
      data: fc.uint8Array({ maxLength: 200 }).map(hexOf),
      accessList: type === 0 ? fc.constant([]) : accessList,
      form: fc.nat(2),
    })
    .map((c) => {
      const [tip, fee] = c.tip <= c.fee ? [c.tip, c.fee] : [c.fee, c.tip];
      const q = (n: bigint) => asQuantity(n, c.form);
      const json: Record<string, unknown> = { chainId: q(c.chainId), nonce: q(c.nonce), gas: q(c.gas), value: q(c.value), data: c.data };
      if (type !== 2) json['type'] = type;
      if (c.to !== undefined) json['to'] = c.to.toLowerCase();
      if (type === 2) Object.assign(json, { maxFeePerGas: q(fee), maxPriorityFeePerGas: q(tip) });
      else json['gasPrice'] = q(fee);
      if (type !== 0) json['accessList'] = c.accessList;
      return { ...c, json };
    });
}
