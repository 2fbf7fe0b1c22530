import { expect } from 'chai';
import { SignerError } from '../../../keyvault/errors.js';
import { parseOperation } from '../../../keyvault/sign/operation.js';

/** Operations the signer must refuse before any key is read, each naming the field at fault. */
const refusal = (body: unknown): SignerError => {
  try {
    parseOperation(body);
  } catch (err) {
    if (err instanceof SignerError) return err;
    throw err;
  }
  throw new Error(`accepted: ${JSON.stringify(body).slice(0, 200)}`);
};

const tx = (fields: Record<string, unknown>) => ({
  method: 'eth_signTransaction',
  params: { transaction: { chainId: 1, nonce: 0, gas: 21000, maxFeePerGas: '100', maxPriorityFeePerGas: '1', ...fields } },
});
const mail = (change: (td: Record<string, unknown>) => void) => {
  const td: Record<string, unknown> = {
    types: {
      Mail: [
        { name: 'contents', type: 'string' },
        { name: 'n', type: 'uint8' },
        { name: 'tag', type: 'bytes4' },
        { name: 'delta', type: 'int8' },
      ],
    },
    primaryType: 'Mail',
    domain: { name: 'x', chainId: 1 },
    message: { contents: 'hi', n: 1, tag: '0x01020304', delta: '-3' },
  };
  change(td);
  return { method: 'eth_signTypedData_v4', params: { typedData: td } };
};
const message = (td: Record<string, unknown>) => td['message'] as Record<string, unknown>;

const cases: Array<[string, unknown, string]> = [
  ['an unknown method', { method: 'eth_sign', params: { hash: '0x00' } }, '/method'],
  ['a raw hash by another name', { method: 'eth_signHash', params: {} }, '/method'],
  ['an unknown top-level field', { method: 'personal_sign', params: { message: 'a' }, extra: 1 }, 'unknown fields: extra'],
  ['no params', { method: 'personal_sign' }, '/params'],
  ['a message over 16 KiB', { method: 'personal_sign', params: { message: 'a'.repeat(16 * 1024 + 1) } }, '/params/message'],
  ['a hex message over 16 KiB', { method: 'personal_sign', params: { message: `0x${'ab'.repeat(16 * 1024 + 1)}` } }, '/params/message'],
  ['a message that is not a string', { method: 'personal_sign', params: { message: 5 } }, '/params/message'],
  ['a transaction without chainId', tx({ chainId: undefined }), '/params/transaction/chainId'],
  ['a transaction for chain 0', tx({ chainId: 0 }), '/params/transaction/chainId'],
  ['a transaction without a nonce', tx({ nonce: undefined }), '/params/transaction/nonce'],
  ['an unknown transaction field', tx({ gasLimit: 21000 }), 'gasLimit'],
  [
    'an access list on a legacy transaction',
    tx({ type: 0, gasPrice: '1', maxFeePerGas: undefined, maxPriorityFeePerGas: undefined, accessList: [] }),
    'accessList',
  ],
  ['EIP-1559 fees on a legacy transaction', tx({ type: 0, gasPrice: '1' }), 'maxFeePerGas'],
  ['a tip above the fee cap', tx({ maxPriorityFeePerGas: '101' }), '/params/transaction/maxPriorityFeePerGas'],
  ['transaction type 3', tx({ type: 3 }), '/params/transaction/type'],
  ['a recipient with a wrong EIP-55 checksum', tx({ to: '0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD827'.replace('CD2a', 'Cd2a') }), '/params/transaction/to'],
  ['a value above 2^256 - 1', tx({ value: (1n << 256n).toString() }), '/params/transaction/value'],
  ['a negative value', tx({ value: -1 }), '/params/transaction/value'],
  ['a fractional gas', tx({ gas: 1.5 }), '/params/transaction/gas'],
  ['a decimal with a leading zero', tx({ value: '010' }), '/params/transaction/value'],
  ['calldata of half a byte', tx({ data: '0xabc' }), '/params/transaction/data'],
  ['a typed-data message missing a field', mail((td) => delete message(td)['n']), '/params/typedData/message/n'],
  ['a typed-data message with an undeclared field', mail((td) => (message(td)['extra'] = 1)), 'extra'],
  ['a uint8 of 256', mail((td) => (message(td)['n'] = 256)), '/params/typedData/message/n'],
  ['an int8 of -129', mail((td) => (message(td)['delta'] = '-129')), '/params/typedData/message/delta'],
  ['a bytes4 of three bytes', mail((td) => (message(td)['tag'] = '0x010203')), '/params/typedData/message/tag'],
  ['a field of an unknown type', mail((td) => ((td['types'] as Record<string, unknown>)['Mail'] = [{ name: 'x', type: 'Unknown' }])), 'unknown type Unknown'],
  ['primaryType EIP712Domain', mail((td) => (td['primaryType'] = 'EIP712Domain')), '/params/typedData/primaryType'],
  [
    'a domain field EIP712Domain does not declare',
    mail((td) => ((td['types'] as Record<string, unknown>)['EIP712Domain'] = [{ name: 'name', type: 'string' }])),
    '/params/typedData/domain/chainId',
  ],
  ['a domain field outside EIP-712', mail((td) => (td['domain'] = { name: 'x', owner: 'me' })), 'owner'],
  [
    'a bool given as a string',
    mail((td) => {
      td['types'] = { Mail: [{ name: 'ok', type: 'bool' }] };
      td['message'] = { ok: 'true' };
    }),
    '/params/typedData/message/ok',
  ],
  [
    'structs nested past the bound',
    mail((td) => {
      td['types'] = { Node: [{ name: 'next', type: 'Node[]' }] };
      td['primaryType'] = 'Node';
      let m: Record<string, unknown> = { next: [] };
      for (let i = 0; i < 40; i++) m = { next: [m] };
      td['message'] = m;
    }),
    'deeper than',
  ],
  [
    'an authorization nonce above 2^64 - 1',
    { method: 'eth_signAuthorization', params: { chainId: 1, address: '0x'.padEnd(42, '1'), nonce: (1n << 64n).toString() } },
    '/params/nonce',
  ],
  ['an authorization without its delegate', { method: 'eth_signAuthorization', params: { chainId: 1, nonce: 0 } }, '/params/address'],
];

describe('signer operations: refusals', () => {
  for (const [what, body, names] of cases) {
    it(`refuses ${what}, naming it`, () => {
      const err = refusal(body);
      expect(err.code).to.equal('invalid_operation');
      expect(err.status).to.equal(400);
      expect(err.message).to.include(names);
    });
  }
});
