import type { Method } from '../sign/operation.js';

/**
 * The fields a policy condition may name, per method, and what kind of value each holds: the
 * kind decides which operators apply and how values compare. A field not listed here is refused
 * when a policy is written, never silently ignored when it is evaluated.
 */
export type FieldKind = 'quantity' | 'address' | 'string' | 'boolean' | 'hex';

const TRANSACTION: Record<string, FieldKind> = {
  type: 'quantity',
  chainId: 'quantity',
  nonce: 'quantity',
  to: 'address',
  value: 'quantity',
  gas: 'quantity',
  gasPrice: 'quantity',
  maxFeePerGas: 'quantity',
  maxPriorityFeePerGas: 'quantity',
  'data.length': 'quantity',
  'data.selector': 'hex',
};

export const CATALOGUE: Record<Method, Record<string, FieldKind>> = {
  personal_sign: { length: 'quantity', isHex: 'boolean', message: 'string' },
  eth_signTypedData_v4: {
    primaryType: 'string',
    'domain.name': 'string',
    'domain.version': 'string',
    'domain.chainId': 'quantity',
    'domain.verifyingContract': 'address',
  },
  eth_signTransaction: TRANSACTION,
  eth_signAuthorization: { chainId: 'quantity', address: 'address', nonce: 'quantity' },
};

/** `message.<path>` of typed data: a leaf of the signed message, compared by the kind of its value. */
export const TYPED_MESSAGE_FIELD = /^message(\.[A-Za-z0-9_$]{1,64}){1,8}$/;
/** `data.args.<n>` of a transaction: an argument of the call, decoded by the rule's `abi`. */
export const CALLDATA_ARG_FIELD = /^data\.args\.([0-9]{1,2})$/;

export const OPERATORS = ['eq', 'neq', 'in', 'not_in', 'lt', 'lte', 'gt', 'gte', 'prefix'] as const;
export type Operator = (typeof OPERATORS)[number];

/** Which operators make sense for a kind: order only for quantities, `prefix` only for text. */
export const OPERATORS_FOR: Record<FieldKind, readonly Operator[]> = {
  quantity: ['eq', 'neq', 'in', 'not_in', 'lt', 'lte', 'gt', 'gte'],
  address: ['eq', 'neq', 'in', 'not_in'],
  string: ['eq', 'neq', 'in', 'not_in', 'prefix'],
  boolean: ['eq', 'neq'],
  hex: ['eq', 'neq', 'in', 'not_in', 'prefix'],
};
