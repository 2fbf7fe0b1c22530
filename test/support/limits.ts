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
