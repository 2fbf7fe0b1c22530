import type { Operation } from '../sign/operation.js';
import { decodeCall, type ArgValue } from './calldata.js';
import { CALLDATA_ARG_FIELD, type FieldKind } from './catalogue.js';
import type { Caller, Condition, ConditionValue, Policy, Rule } from './document.js';

/**
 * A decision on a read operation, before any key is touched: default deny, and a matching `deny`
 * beats every `allow` (SIGNING.md). `rule` names the rule that decided, or is null when no rule
 * allowed the operation.
 */
export interface Decision {
  allowed: boolean;
  rule: string | null;
}

type Field = { kind: FieldKind; value: ConditionValue } | undefined;

const kindOfType = (type: string): FieldKind =>
  type === 'address' ? 'address' : type === 'bool' ? 'boolean' : type === 'string' ? 'string' : /^u?int/.test(type) ? 'quantity' : 'hex';

/** A field's value normalised as conditions hold theirs (quantities bigint, addresses and hex lower-case). */
function normalise(kind: FieldKind, v: unknown): ConditionValue | undefined {
  if (v === undefined || v === null) return undefined;
  switch (kind) {
    case 'quantity':
      if (typeof v === 'bigint') return v;
      if (typeof v === 'number') return BigInt(v);
      if (typeof v === 'string' && /^-?(0|[1-9][0-9]*)$|^0x[0-9a-fA-F]+$/.test(v)) return BigInt(v);
      return undefined;
    case 'address':
    case 'hex':
      return typeof v === 'string' ? v.toLowerCase() : undefined;
    case 'boolean':
      return typeof v === 'boolean' ? v : undefined;
    case 'string':
      return typeof v === 'string' ? v : undefined;
  }
}

function fieldOf(op: Operation, args: ArgValue[] | undefined, c: Condition): Field {
  const arg = CALLDATA_ARG_FIELD.exec(c.field);
  if (arg) {
    const a = args?.[Number(arg[1])];
    return a ? { kind: a.kind, value: typeof a.value === 'string' ? a.value.toLowerCase() : a.value } : undefined;
  }
  if (c.kind === 'any') {
    const leaf = op.typedLeaf?.(c.field.split('.').slice(1));
    if (!leaf) return undefined;
    const kind = kindOfType(leaf.type);
    const value = normalise(kind, leaf.value);
    return value === undefined ? undefined : { kind, value };
  }
  const value = normalise(c.kind, op.fields[c.field]);
  return value === undefined ? undefined : { kind: c.kind, value };
}

/** A condition's value read as the field's kind (a typed message's leaf is known only now). */
function asKind(kind: FieldKind, v: ConditionValue): ConditionValue | undefined {
  if (typeof v === 'bigint') return kind === 'quantity' ? v : undefined;
  return normalise(kind, v);
}

/**
 * One condition. An absent field (a contract creation's `to`, a call that is not the rule's
 * function) equals nothing: `eq`, `in`, order and `prefix` are false, `neq` and `not_in` true, so
 * a deny rule on "to not_in [...]" denies a contract creation and an allow rule on "to in [...]"
 * does not allow one.
 */
function holds(c: Condition, field: Field): boolean {
  const negated = c.op === 'neq' || c.op === 'not_in';
  if (!field) return negated;
  const values = c.values.map((v) => asKind(field.kind, v));
  const equal = values.some((v) => v !== undefined && v === field.value);
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
      if (typeof v !== 'bigint' || typeof field.value !== 'bigint') return false;
      if (c.op === 'lt') return field.value < v;
      if (c.op === 'lte') return field.value <= v;
      if (c.op === 'gt') return field.value > v;
      return field.value >= v;
    }
  }
}

/** An authorization for any chain (chainId 0) is allowed only by a rule that names chain 0 itself. */
const namesChainZero = (rule: Rule): boolean =>
  rule.conditions.some((c) => c.field === 'chainId' && (c.op === 'eq' || c.op === 'in') && c.values.some((v) => v === 0n));

function matches(rule: Rule, op: Operation, caller: Caller): boolean {
  if (rule.method !== op.method) return false;
  if (rule.callers && !rule.callers.includes(caller)) return false;
  let args: ArgValue[] | undefined;
  if (rule.abi) {
    args = op.calldata ? decodeCall(rule.abi, op.calldata) : undefined;
    // A rule about a function says nothing about calldata that is not a call of it.
    if (!args) return false;
  }
  return rule.conditions.every((c) => holds(c, fieldOf(op, args, c)));
}

export function evaluate(policy: Policy | undefined, op: Operation, caller: Caller): Decision {
  if (!policy) return { allowed: false, rule: null };
  const deny = policy.rules.find((r) => r.action === 'deny' && matches(r, op, caller));
  if (deny) return { allowed: false, rule: deny.name };
  const anyChain = op.method === 'eth_signAuthorization' && op.fields['chainId'] === 0n;
  const allow = policy.rules.find((r) => r.action === 'allow' && matches(r, op, caller) && (!anyChain || namesChainZero(r)));
  return allow ? { allowed: true, rule: allow.name } : { allowed: false, rule: null };
}
