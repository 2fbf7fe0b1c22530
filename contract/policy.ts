import { POLICY_BOUNDS } from './bounds.js';
import { isSigningMethod, SIGNING_METHODS, type SigningMethod } from './signing.js';

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
  // gas × (maxFeePerGas or gasPrice) + value: the most the transaction can take from the wallet.
  maxCost: 'quantity',
};

export const CATALOGUE: Record<SigningMethod, Record<string, FieldKind>> = {
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
  // A transaction the service broadcasts: its final fields as signed, and why it is signed (SEND_PURPOSES).
  eth_sendTransaction: { ...TRANSACTION, purpose: 'string' },
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

export const RULE_ACTIONS = ['allow', 'deny'] as const;
export type RuleAction = (typeof RULE_ACTIONS)[number];

/**
 * A limit's windows and their lengths in seconds. The signer accepts a policy with any of them and
 * the API counts signatures over them: a window one side lacked would fail every signature of a
 * project whose policy names it.
 */
export const LIMIT_WINDOWS = { '1m': 60, '1h': 3600, '24h': 86_400, '7d': 604_800, '30d': 2_592_000 } as const;
export type LimitWindow = keyof typeof LIMIT_WINDOWS;

/** What a limit counts signatures of: each wallet's, or the whole project's. */
export const LIMIT_SCOPES = ['wallet', 'project'] as const;
export type LimitScope = (typeof LIMIT_SCOPES)[number];

/**
 * A rolling-window limit of a policy: at most `count` signatures of `method` per `per` in the last
 * `window`, or (a budget, for the methods that sign transactions) at most `wei` of their maximum
 * cost (gas × fee cap + value) in all.
 */
export type PolicyLimit = { method: SigningMethod; per: LimitScope; window: LimitWindow } & ({ count: number; wei?: never } | { wei: bigint; count?: never });

const WEI = /^(0|[1-9][0-9]{0,77})$/;

/** The methods a `wei` budget may count: those whose operations have a maximum cost. */
export const BUDGET_METHODS: readonly SigningMethod[] = ['eth_signTransaction', 'eth_sendTransaction'];

/**
 * The one reading of a limit, used by the signer when a policy is written and by the API when it
 * counts: the limit, or the first field that is wrong and what it must be.
 */
export function readLimit(
  l: Readonly<Record<string, unknown>>,
): { ok: true; limit: PolicyLimit } | { ok: false; field: 'method' | 'per' | 'window' | 'count' | 'wei'; problem: string } {
  const { method, per, window, count, wei } = l;
  if (!isSigningMethod(method)) return { ok: false, field: 'method', problem: `must be one of ${SIGNING_METHODS.join(', ')}` };
  if (!(LIMIT_SCOPES as readonly unknown[]).includes(per))
    return { ok: false, field: 'per', problem: `must be ${LIMIT_SCOPES.map((s) => `"${s}"`).join(' or ')}` };
  // Own keys only: `toString` is no window.
  if (typeof window !== 'string' || !Object.hasOwn(LIMIT_WINDOWS, window))
    return { ok: false, field: 'window', problem: `must be one of ${Object.keys(LIMIT_WINDOWS).join(', ')}` };
  const common = { method, per: per as LimitScope, window: window as LimitWindow };
  if (wei !== undefined) {
    if (count !== undefined) return { ok: false, field: 'wei', problem: 'a limit counts signatures (count) or wei (wei), not both' };
    if (!BUDGET_METHODS.includes(method)) return { ok: false, field: 'wei', problem: `a budget in wei applies to ${BUDGET_METHODS.join(' and ')} only` };
    if (typeof wei !== 'string' || !WEI.test(wei) || wei === '0')
      return { ok: false, field: 'wei', problem: 'must be a positive amount of wei as a decimal string' };
    return { ok: true, limit: { ...common, wei: BigInt(wei) } };
  }
  if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 1 || count > POLICY_BOUNDS.limitCount)
    return { ok: false, field: 'count', problem: 'must be an integer from 1' };
  return { ok: true, limit: { ...common, count } };
}
