import { UNREADABLE, type Operation } from '../sign/operation.js';
import { readCall, type Call, type FunctionAbi } from './calldata.js';
import { CALLDATA_ARG_FIELD, OPERATORS_FOR, type FieldKind } from '../../contract/index.js';
import type { Caller, Condition, ConditionValue, Policy, Rule } from './document.js';

/**
 * A decision on a read operation, before any key is touched: default deny, and a matching `deny`
 * beats every `allow` (docs/signing.md). `rule` names the rule that decided, or is null when no rule
 * allowed the operation.
 */
export interface Decision {
  allowed: boolean;
  rule: string | null;
}

/**
 * What a condition reads: the field's value in its kind; `absent` when the operation has no such
 * field (a creation's `to`, a typed message without that path); `unreadable` when it has one that
 * cannot be read as the rule needs (message bytes that are not UTF-8, the arguments of a call of
 * the rule's function in a non-canonical encoding).
 */
type Field = { kind: FieldKind; value: ConditionValue } | 'absent' | 'unreadable';

const kindOfType = (type: string): FieldKind =>
  type === 'address' ? 'address' : type === 'bool' ? 'boolean' : type === 'string' ? 'string' : /^u?int/.test(type) ? 'quantity' : 'hex';

/** A value in a kind as conditions hold theirs (quantities bigint, addresses and hex lower-case), or undefined when it is not one. */
function normalise(kind: FieldKind, v: unknown): ConditionValue | undefined {
  switch (kind) {
    case 'quantity':
      if (typeof v === 'bigint') return v;
      if (typeof v === 'number') return Number.isSafeInteger(v) ? BigInt(v) : undefined;
      if (typeof v === 'string' && /^-?(0|[1-9][0-9]*)$|^0x[0-9a-fA-F]+$/.test(v)) return BigInt(v);
      return undefined;
    case 'address':
      return typeof v === 'string' && /^0x[0-9a-fA-F]{40}$/.test(v) ? v.toLowerCase() : undefined;
    case 'hex':
      // Any number of digits: a `prefix` may end inside a byte.
      return typeof v === 'string' && /^0x[0-9a-fA-F]*$/.test(v) ? v.toLowerCase() : undefined;
    case 'boolean':
      return typeof v === 'boolean' ? v : undefined;
    case 'string':
      return typeof v === 'string' ? v : undefined;
  }
}

/** An operation's value read as `kind`; one it has but that is not of the kind is unreadable, never absent. */
function read(kind: FieldKind, v: unknown): Field {
  if (v === undefined) return 'absent';
  if (v === UNREADABLE) return 'unreadable';
  const value = normalise(kind, v);
  return value === undefined ? 'unreadable' : { kind, value };
}

function fieldOf(op: Operation, call: Call | undefined, c: Condition): Field {
  const arg = CALLDATA_ARG_FIELD.exec(c.field);
  if (arg) {
    if (call === 'non-canonical') return 'unreadable';
    const a = Array.isArray(call) ? call[Number(arg[1])] : undefined;
    return a ? read(a.kind, a.value) : 'absent';
  }
  if (c.kind === 'any') {
    const leaf = op.typedLeaf?.(c.field.split('.').slice(1));
    return leaf ? read(kindOfType(leaf.type), leaf.value) : 'absent';
  }
  return read(c.kind, op.fields[c.field]);
}

/** A condition's value read as the field's kind (a typed message's leaf is known only now). */
function asKind(kind: FieldKind, v: ConditionValue): ConditionValue | undefined {
  if (typeof v === 'bigint') return kind === 'quantity' ? v : undefined;
  return normalise(kind, v);
}

type Prepared = { values: ConditionValue[]; set: ReadonlySet<ConditionValue> } | 'unfit';
/**
 * A condition's values read as a kind, once per policy version and kind: a decision costs a
 * look-up per condition, however long its list (a policy is read once and kept).
 */
const prepared = new WeakMap<Condition, Map<FieldKind, Prepared>>();
function preparedValues(c: Condition, kind: FieldKind): Prepared {
  let byKind = prepared.get(c);
  if (!byKind) prepared.set(c, (byKind = new Map<FieldKind, Prepared>()));
  let p = byKind.get(kind);
  if (p === undefined) {
    const values = c.values.map((v) => asKind(kind, v));
    p = values.every((v): v is ConditionValue => v !== undefined) ? { values, set: new Set(values) } : 'unfit';
    byKind.set(kind, p);
  }
  return p;
}

/**
 * One condition of a rule with `action`. An absent field equals nothing: `eq`, `in`, order and
 * `prefix` are false, `neq` and `not_in` true, so a deny rule on "to not_in [...]" denies a
 * contract creation and an allow rule on "to in [...]" does not allow one. A condition that
 * cannot be judged (the field unreadable, an operator or a value that does not fit the kind of a
 * typed message's leaf) fails closed: it holds for a deny rule and not for an allow rule, so no
 * spelling the rule cannot read escapes a deny or widens an allow.
 */
function holds(c: Condition, field: Field, action: Rule['action']): boolean {
  const cannotJudge = action === 'deny';
  if (field === 'unreadable') return cannotJudge;
  if (field === 'absent') return c.op === 'neq' || c.op === 'not_in';
  if (!OPERATORS_FOR[field.kind].includes(c.op)) return cannotJudge;
  const read = preparedValues(c, field.kind);
  if (read === 'unfit') return cannotJudge;
  const { values, set } = read;
  const equal = set.has(field.value);
  switch (c.op) {
    case 'eq':
    case 'in':
      return equal;
    case 'neq':
    case 'not_in':
      return !equal;
    case 'prefix':
      return typeof field.value === 'string' && typeof values[0] === 'string' && field.value.startsWith(values[0]);
    default: {
      const [v] = values;
      if (typeof v !== 'bigint' || typeof field.value !== 'bigint') return cannotJudge;
      if (c.op === 'lt') return field.value < v;
      if (c.op === 'lte') return field.value <= v;
      if (c.op === 'gt') return field.value > v;
      return field.value >= v;
    }
  }
}

/** The calldata read as a call of `abi`, once per operation and function, however many rules name it. */
const calls = new WeakMap<Operation, Map<string, Call>>();
function callOf(op: Operation, abi: FunctionAbi): Call {
  let byAbi = calls.get(op);
  if (!byAbi) calls.set(op, (byAbi = new Map<string, Call>()));
  let call = byAbi.get(abi.signature);
  if (call === undefined) byAbi.set(abi.signature, (call = readCall(abi, op.calldata ?? new Uint8Array(0))));
  return call;
}

/** An authorization for any chain (chainId 0) is allowed only by a rule that names chain 0 itself. */
const namesChainZero = (rule: Rule): boolean =>
  rule.conditions.some((c) => c.field === 'chainId' && (c.op === 'eq' || c.op === 'in') && c.values.some((v) => v === 0n));

function matches(rule: Rule, op: Operation, caller: Caller): boolean {
  if (rule.method !== op.method) return false;
  if (rule.callers && !rule.callers.includes(caller)) return false;
  let call: Call | undefined;
  if (rule.abi) {
    call = op.calldata ? callOf(op, rule.abi) : 'another call';
    // A rule about a function says nothing about other calls. A call of it in another encoding than
    // the canonical one is never allowed by it; a deny rule about it cannot read its arguments.
    if (call === 'another call' || (call === 'non-canonical' && rule.action === 'allow')) return false;
  }
  return rule.conditions.every((c) => holds(c, fieldOf(op, call, c), rule.action));
}

export function evaluate(policy: Policy | undefined, op: Operation, caller: Caller): Decision {
  if (!policy) return { allowed: false, rule: null };
  const deny = policy.rules.find((r) => r.action === 'deny' && matches(r, op, caller));
  if (deny) return { allowed: false, rule: deny.name };
  const anyChain = op.method === 'eth_signAuthorization' && op.fields['chainId'] === 0n;
  const allow = policy.rules.find((r) => r.action === 'allow' && matches(r, op, caller) && (!anyChain || namesChainZero(r)));
  return allow ? { allowed: true, rule: allow.name } : { allowed: false, rule: null };
}
