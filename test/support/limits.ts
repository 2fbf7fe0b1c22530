import { LIMITS } from '../../keyvault/limits.js';

/**
 * Operations built from the signer's limits (keyvault/limits.ts), for the tests of each limit and
 * for bench/hostile.ts: each case at its limit (accepted) and one past it (refused, naming what).
 * Built from LIMITS, so a changed limit moves its cases with it.
 */
export interface LimitCase {
  name: string;
  /** At the limit: the signer reads it. */
  at: () => unknown;
  /** One past: refused with invalid_operation, the message naming this. */
  past: () => unknown;
  names: string;
}

const T = LIMITS.typedData;
const domain = { name: 'limits', chainId: 1 };
const typed = (types: Record<string, Array<{ name: string; type: string }>>, primaryType: string, message: unknown) => ({
  method: 'eth_signTypedData_v4',
  params: { typedData: { types, primaryType, domain, message } },
});
const tx = (fields: Record<string, unknown>) => ({
  method: 'eth_signTransaction',
  params: { transaction: { chainId: 1, nonce: 0, gas: 21000, maxFeePerGas: '100', maxPriorityFeePerGas: '1', to: `0x${'11'.repeat(20)}`, ...fields } },
});
const personal = (message: string) => ({ method: 'personal_sign', params: { message } });

/**
 * `values` values in all (the domain's two included): `fields` arrays of empty strings (a thousand
 * or fewer each), each string a keccak of its own, the dearest value per byte of request there is.
 */
export function typedDataOfValues(values: number, fields = Math.ceil(values / 1000)): unknown {
  const inMessage = values - 2;
  const per = Math.floor(inMessage / fields) - 1;
  const extra = inMessage - fields * (per + 1);
  const types = { Values: Array.from({ length: fields }, (_, i) => ({ name: `f${i}`, type: 'string[]' })) };
  const message = Object.fromEntries(types.Values.map((f, i) => [f.name, Array.from({ length: per + (i < extra ? 1 : 0) }, () => '')]));
  return typed(types, 'Values', message);
}

/** A chain of nested structs `depth` deep below the message. */
function nested(depth: number): unknown {
  const types: Record<string, Array<{ name: string; type: string }>> = {};
  for (let i = 0; i < depth; i++) types[`S${i}`] = [{ name: 'inner', type: `S${i + 1}` }];
  types[`S${depth}`] = [{ name: 'v', type: 'uint8' }];
  let message: unknown = { v: 1 };
  for (let i = 0; i < depth; i++) message = { inner: message };
  return typed(types, 'S0', message);
}

/** `n` struct types, the first naming the others. */
function manyTypes(n: number): unknown {
  const types: Record<string, Array<{ name: string; type: string }>> = { Root: [] };
  for (let i = 1; i < n; i++) {
    types[`T${i}`] = [{ name: 'v', type: 'uint8' }];
    (types['Root'] ??= []).push({ name: `t${i}`, type: `T${i}` });
  }
  return typed(types, 'Root', Object.fromEntries(Array.from({ length: n - 1 }, (_, i) => [`t${i + 1}`, { v: 1 }])));
}

const fieldsOf = (n: number) =>
  typed(
    { Wide: Array.from({ length: n }, (_, i) => ({ name: `f${i}`, type: 'uint8' })) },
    'Wide',
    Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, i % 256])),
  );
const arrayOf = (n: number) => typed({ List: [{ name: 'items', type: 'uint8[]' }] }, 'List', { items: Array.from({ length: n }, () => 1) });
const stringOf = (n: number) => typed({ Text: [{ name: 'text', type: 'string' }] }, 'Text', { text: 'a'.repeat(n) });
const bytesOf = (n: number) => typed({ Blob: [{ name: 'blob', type: 'bytes' }] }, 'Blob', { blob: `0x${'ab'.repeat(n)}` });
const accessListOf = (addresses: number, keys: number) =>
  tx({
    accessList: Array.from({ length: addresses }, (_, i) => ({
      address: `0x${i.toString(16).padStart(40, '0')}`,
      storageKeys: Array.from({ length: Math.floor(keys / addresses) + (i < keys % addresses ? 1 : 0) }, (_, j) => `0x${j.toString(16).padStart(64, '0')}`),
    })),
  });

export const LIMIT_CASES: LimitCase[] = [
  {
    name: 'personal_sign: message bytes',
    at: () => personal('a'.repeat(LIMITS.messageBytes)),
    past: () => personal('a'.repeat(LIMITS.messageBytes + 1)),
    names: `over ${LIMITS.messageBytes} bytes`,
  },
  {
    name: 'personal_sign: message bytes as hex',
    at: () => personal(`0x${'ab'.repeat(LIMITS.messageBytes)}`),
    past: () => personal(`0x${'ab'.repeat(LIMITS.messageBytes + 1)}`),
    names: `over ${LIMITS.messageBytes} bytes`,
  },
  { name: 'typed data: values', at: () => typedDataOfValues(T.values), past: () => typedDataOfValues(T.values + 1), names: `past ${T.values} values` },
  { name: 'typed data: types', at: () => manyTypes(T.types), past: () => manyTypes(T.types + 1), names: `more than ${T.types} types` },
  {
    name: 'typed data: fields per type',
    at: () => fieldsOf(T.fieldsPerType),
    past: () => fieldsOf(T.fieldsPerType + 1),
    names: `more than ${T.fieldsPerType} fields`,
  },
  { name: 'typed data: depth', at: () => nested(T.depth), past: () => nested(T.depth + 1), names: `deeper than ${T.depth}` },
  { name: 'typed data: array length', at: () => arrayOf(T.arrayLength), past: () => arrayOf(T.arrayLength + 1), names: `more than ${T.arrayLength} elements` },
  { name: 'typed data: string bytes', at: () => stringOf(T.stringBytes), past: () => stringOf(T.stringBytes + 1), names: `over ${T.stringBytes} bytes` },
  { name: 'typed data: bytes length', at: () => bytesOf(T.bytesBytes), past: () => bytesOf(T.bytesBytes + 1), names: `over ${T.bytesBytes} bytes` },
  {
    name: 'transaction: calldata bytes',
    at: () => tx({ data: `0x${'ab'.repeat(LIMITS.transaction.dataBytes)}` }),
    past: () => tx({ data: `0x${'ab'.repeat(LIMITS.transaction.dataBytes + 1)}` }),
    names: `over ${LIMITS.transaction.dataBytes} bytes`,
  },
  {
    name: 'transaction: access-list addresses',
    at: () => accessListOf(LIMITS.transaction.accessListAddresses, 0),
    past: () => accessListOf(LIMITS.transaction.accessListAddresses + 1, 0),
    names: `more than ${LIMITS.transaction.accessListAddresses} entries`,
  },
  {
    name: 'transaction: storage keys',
    at: () => accessListOf(8, LIMITS.transaction.storageKeys),
    past: () => accessListOf(8, LIMITS.transaction.storageKeys + 1),
    names: `past ${LIMITS.transaction.storageKeys} storage keys`,
  },
];

/**
 * The dearest operation of each method within the limits: what a hostile caller sends to keep
 * the signer busy (bench/hostile.ts).
 */
export const MAXIMAL: Record<string, () => unknown> = {
  personal_sign: () => personal(`0x${'ab'.repeat(LIMITS.messageBytes)}`),
  eth_signTypedData_v4: () => typedDataOfValues(T.values),
  eth_signTransaction: () => tx({ data: `0x${'ab'.repeat(LIMITS.transaction.dataBytes)}` }),
  eth_signAuthorization: () => ({ method: 'eth_signAuthorization', params: { chainId: 1, address: `0x${'22'.repeat(20)}`, nonce: 0 } }),
};

/** Far past the values limit, within every other bound and the body limit: 64 arrays at their longest, eight times the limit. */
export const FAR_PAST_VALUES = (): unknown => typedDataOfValues(2 + T.fieldsPerType * (T.arrayLength + 1), T.fieldsPerType);

const address = (i: number) => `0x${(i + 1).toString(16).padStart(40, '0')}`;
const word = (i: number) => `0x${(i + 1).toString(16).padStart(64, '0')}`;
const offerItem = [
  { name: 'itemType', type: 'uint8' },
  { name: 'token', type: 'address' },
  { name: 'identifierOrCriteria', type: 'uint256' },
  { name: 'startAmount', type: 'uint256' },
  { name: 'endAmount', type: 'uint256' },
];
const seaportTypes = {
  EIP712Domain: [
    { name: 'name', type: 'string' },
    { name: 'version', type: 'string' },
    { name: 'chainId', type: 'uint256' },
    { name: 'verifyingContract', type: 'address' },
  ],
  OrderComponents: [
    { name: 'offerer', type: 'address' },
    { name: 'zone', type: 'address' },
    { name: 'offer', type: 'OfferItem[]' },
    { name: 'consideration', type: 'ConsiderationItem[]' },
    { name: 'orderType', type: 'uint8' },
    { name: 'startTime', type: 'uint256' },
    { name: 'endTime', type: 'uint256' },
    { name: 'zoneHash', type: 'bytes32' },
    { name: 'salt', type: 'uint256' },
    { name: 'conduitKey', type: 'bytes32' },
    { name: 'counter', type: 'uint256' },
  ],
  OfferItem: offerItem,
  ConsiderationItem: [...offerItem, { name: 'recipient', type: 'address' }],
};
const seaportDomain = { name: 'Seaport', version: '1.6', chainId: 1, verifyingContract: '0x0000000000000068f116a894984e2db1123eb395' };
const order = (items: number) => ({
  offerer: address(1),
  zone: address(0),
  offer: [{ itemType: 2, token: address(2), identifierOrCriteria: '1234', startAmount: '1', endAmount: '1' }],
  consideration: Array.from({ length: items }, (_, i) => ({
    itemType: 0,
    token: address(0),
    identifierOrCriteria: '0',
    startAmount: '975000000000000000',
    endAmount: '975000000000000000',
    recipient: address(i + 10),
  })),
  orderType: 0,
  startTime: '1700000000',
  endTime: '1800000000',
  zoneHash: word(0),
  salt: '24446860302761739304752683030156737591518664810215442929802166525390939074843',
  conduitKey: word(1),
  counter: '0',
});
/** A Seaport bulk order: a tree of 2^height orders, each with `items` consideration items. */
function bulkOrder(height: number, items: number): unknown {
  let tree: unknown = order(items);
  for (let i = 0; i < height; i++) tree = [tree, tree];
  const type = `OrderComponents${'[2]'.repeat(height)}`;
  return { types: { ...seaportTypes, BulkOrder: [{ name: 'tree', type }] }, primaryType: 'BulkOrder', domain: seaportDomain, message: { tree } };
}

/**
 * Typed data real wallets are asked to sign, each comfortably within the limits (docs/signing.md
 * names them): an EIP-2612 permit, a Permit2 batch permit of 100 tokens, a Seaport order of ten
 * consideration items and a Seaport bulk listing of 64 orders (a tree of height 6) of three
 * consideration items each (price, marketplace fee, royalty).
 */
export const REAL_TYPED_DATA: Record<string, unknown> = {
  'EIP-2612 permit': {
    types: {
      EIP712Domain: seaportTypes.EIP712Domain,
      Permit: [
        { name: 'owner', type: 'address' },
        { name: 'spender', type: 'address' },
        { name: 'value', type: 'uint256' },
        { name: 'nonce', type: 'uint256' },
        { name: 'deadline', type: 'uint256' },
      ],
    },
    primaryType: 'Permit',
    domain: { name: 'USD Coin', version: '2', chainId: 1, verifyingContract: '0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48' },
    message: { owner: address(1), spender: address(2), value: '1000000', nonce: 0, deadline: '1800000000' },
  },
  'Permit2 batch permit of 100 tokens': {
    types: {
      PermitBatch: [
        { name: 'details', type: 'PermitDetails[]' },
        { name: 'spender', type: 'address' },
        { name: 'sigDeadline', type: 'uint256' },
      ],
      PermitDetails: [
        { name: 'token', type: 'address' },
        { name: 'amount', type: 'uint160' },
        { name: 'expiration', type: 'uint48' },
        { name: 'nonce', type: 'uint48' },
      ],
    },
    primaryType: 'PermitBatch',
    domain: { name: 'Permit2', chainId: 1, verifyingContract: '0x000000000022d473030f116ddee9f6b43ac78ba3' },
    message: {
      details: Array.from({ length: 100 }, (_, i) => ({
        token: address(i + 100),
        amount: '1461501637330902918203684832716283019655932542975',
        expiration: 1800000000,
        nonce: i,
      })),
      spender: address(3),
      sigDeadline: '1800000000',
    },
  },
  'Seaport order of ten consideration items': { types: seaportTypes, primaryType: 'OrderComponents', domain: seaportDomain, message: order(10) },
  'Seaport bulk listing of 64 orders (height 6), three consideration items each': bulkOrder(6, 3),
};
