import {
  CALLDATA_ARG_FIELD,
  CALLERS,
  CATALOGUE,
  isSigningMethod,
  OPERATORS,
  OPERATORS_FOR,
  LIMIT_WINDOWS,
  readLimit,
  RULE_ACTIONS,
  SIGNING_METHODS,
  TYPED_MESSAGE_FIELD,
  type Caller,
  type FieldKind,
  type Operator,
  type PolicyLimit,
  type RuleAction,
  type SigningMethod as Method,
} from '../../contract/index.js';
import { SignerError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { lowerAddress, object, quantity, signedText } from '../sign/input.js';
import { parseFunctionAbi, type FunctionAbi } from './calldata.js';

/**
 * A project's policy (docs/signing.md): rules that allow or deny an operation by its method, its
 * caller and conditions on the catalogue's fields, and rolling-window limits (evaluated by the
 * API, which keeps the counters). Read strictly: a policy that names an unknown field, an
 * operator its field cannot take or a value of the wrong kind is refused when it is written.
 */
export type { Caller };
/** A value as a condition holds it, normalised: quantities as bigint, addresses and hex lower-case. */
export type ConditionValue = bigint | string | boolean;

export interface Condition {
  field: string;
  /** The field's kind; `any` for a typed message's leaf, whose kind is its declared type. */
  kind: FieldKind | 'any';
  op: Operator;
  values: ConditionValue[];
  /** The values as written, for presenting the policy back. */
  raw: unknown;
}

export interface Rule {
  name: string;
  action: RuleAction;
  method: Method;
  callers: Caller[] | undefined;
  abi: FunctionAbi | undefined;
  conditions: Condition[];
}

export interface Limit {
  method: Method;
  per: PolicyLimit['per'];
  windowSeconds: number;
  /** Signatures counted, or (a budget) wei of their maximum cost: exactly one of the two. */
  count?: number;
  wei?: string;
}

export interface Policy {
  rules: Rule[];
  limits: Limit[];
}

const {
  rules: MAX_RULES,
  conditionsPerRule: MAX_CONDITIONS,
  valuesPerList: MAX_VALUES,
  values: MAX_POLICY_VALUES,
  textChars: MAX_TEXT,
  limits: MAX_LIMITS,
  ruleNameChars: MAX_RULE_NAME,
} = LIMITS.policy;
const RULE_NAME = new RegExp(`^[\\x20-\\x7e]{1,${MAX_RULE_NAME}}$`);

const refuse = (path: string, message: string): never => {
  throw new SignerError('invalid_policy', `${path} ${message}`);
};

/** A value of `kind`, normalised, or a refusal naming `path`. */
function valueOf(kind: FieldKind | 'any', v: unknown, path: string): ConditionValue {
  switch (kind) {
    case 'quantity':
      if (typeof v === 'string' && /^-[1-9][0-9]{0,77}$/.test(v)) return BigInt(v);
      return quantity(v, path);
    case 'address':
      return lowerAddress(v, path);
    case 'hex':
      if (typeof v !== 'string' || !/^0x([0-9a-fA-F]{2}){0,64}$/.test(v)) return refuse(path, 'must be 0x hex of whole bytes');
      return v.toLowerCase();
    case 'boolean':
      if (typeof v !== 'boolean') return refuse(path, 'must be true or false');
      return v;
    case 'string':
      if (typeof v !== 'string' || v.length > MAX_TEXT) return refuse(path, `must be a string of at most ${MAX_TEXT} characters`);
      return text(v, path);
    case 'any':
      if (typeof v === 'boolean') return v;
      if (typeof v === 'number') return quantity(v, path);
      if (typeof v !== 'string' || v.length > MAX_TEXT) return refuse(path, 'must be a string, number or boolean');
      return text(v, path);
  }
}

/**
 * Text as signed messages read theirs: an unpaired surrogate is no text (signed, it is U+FFFD), so
 * a condition naming one could never mean what it says.
 */
const text = (v: string, path: string): string => (signedText(v) === v ? v : refuse(path, 'must be well-formed text (no unpaired surrogates)'));

function kindOf(method: Method, field: string, abi: FunctionAbi | undefined, path: string): FieldKind | 'any' {
  const fixed = CATALOGUE[method][field];
  if (fixed) return fixed;
  if (method === 'eth_signTypedData_v4' && TYPED_MESSAGE_FIELD.test(field)) return 'any';
  const arg = CALLDATA_ARG_FIELD.exec(field);
  if ((method === 'eth_signTransaction' || method === 'eth_sendTransaction') && arg) {
    if (!abi) return refuse(path, 'names a call argument: the rule needs an "abi" (a function signature)');
    const type = abi.args[Number(arg[1])];
    if (type === undefined) return refuse(path, `names argument ${arg[1]}, but ${abi.signature} has ${abi.args.length}`);
    return type === 'address' ? 'address' : type === 'bool' ? 'boolean' : type.startsWith('bytes') ? 'hex' : 'quantity';
  }
  return refuse(path, `is not a field of ${method} (see the field catalogue)`);
}

/** Condition values read so far in one policy: the whole document's are bounded, not only each list's. */
interface Count {
  values: number;
}

function parseCondition(method: Method, abi: FunctionAbi | undefined, v: unknown, path: string, count: Count): Condition {
  const c = object(v, path, ['field', 'op', 'value'], ['field', 'op', 'value']);
  const field = c['field'];
  if (typeof field !== 'string') return refuse(`${path}/field`, 'must be a string');
  const kind = kindOf(method, field, abi, `${path}/field`);
  const op = c['op'];
  if (typeof op !== 'string' || !(OPERATORS as readonly string[]).includes(op)) return refuse(`${path}/op`, `must be one of ${OPERATORS.join(', ')}`);
  const allowed = kind === 'any' ? OPERATORS : OPERATORS_FOR[kind];
  if (!allowed.includes(op as Operator)) return refuse(`${path}/op`, `does not apply to ${field} (${kind}): use ${allowed.join(', ')}`);
  const raw = c['value'];
  const many = op === 'in' || op === 'not_in';
  if (many && (!Array.isArray(raw) || raw.length === 0 || raw.length > MAX_VALUES))
    return refuse(`${path}/value`, `must be a list of 1 to ${MAX_VALUES} values`);
  if (!many && Array.isArray(raw)) return refuse(`${path}/value`, `must be one value for ${op}`);
  count.values += many ? (raw as unknown[]).length : 1;
  if (count.values > MAX_POLICY_VALUES) return refuse(`${path}/value`, `takes the policy past ${MAX_POLICY_VALUES} condition values`);
  const values = (many ? (raw as unknown[]) : [raw]).map((x, i) => valueOf(kind, x, many ? `${path}/value/${i}` : `${path}/value`));
  if (op === 'prefix' && typeof values[0] !== 'string') return refuse(`${path}/value`, 'must be a string for prefix');
  return { field, kind, op: op as Operator, values, raw };
}

function parseRule(v: unknown, path: string, count: Count): Rule {
  const r = object(v, path, ['name', 'action', 'method', 'caller', 'abi', 'conditions'], ['name', 'action', 'method']);
  const name = r['name'];
  if (typeof name !== 'string' || !RULE_NAME.test(name)) return refuse(`${path}/name`, `must be 1-${MAX_RULE_NAME} printable characters`);
  const action = r['action'];
  if (!RULE_ACTIONS.some((a) => a === action)) return refuse(`${path}/action`, `must be ${RULE_ACTIONS.map((a) => `"${a}"`).join(' or ')}`);
  const method = r['method'];
  if (!isSigningMethod(method)) return refuse(`${path}/method`, `must be one of ${SIGNING_METHODS.join(', ')}`);
  const caller = r['caller'];
  let callers: Caller[] | undefined;
  if (caller !== undefined) {
    if (!Array.isArray(caller) || caller.length === 0 || !caller.every((c) => CALLERS.some((k) => k === c)))
      return refuse(`${path}/caller`, `must be a list of ${CALLERS.map((k) => `"${k}"`).join(' and ')}`);
    callers = [...new Set(caller as Caller[])];
  }
  let abi: FunctionAbi | undefined;
  if (r['abi'] !== undefined) {
    if (method !== 'eth_signTransaction' && method !== 'eth_sendTransaction')
      return refuse(`${path}/abi`, 'applies to eth_signTransaction and eth_sendTransaction only');
    abi = typeof r['abi'] === 'string' ? parseFunctionAbi(r['abi']) : undefined;
    if (!abi) return refuse(`${path}/abi`, 'must be a function signature of static arguments, such as transfer(address,uint256)');
  }
  const raw = r['conditions'] ?? [];
  if (!Array.isArray(raw) || raw.length > MAX_CONDITIONS) return refuse(`${path}/conditions`, `must be a list of at most ${MAX_CONDITIONS} conditions`);
  const conditions = raw.map((c, i) => parseCondition(method, abi, c, `${path}/conditions/${i}`, count));
  return { name, action: action as RuleAction, method, callers, abi, conditions };
}

/** A limit as the contract reads it (the API counts by the same reading), with its window's length. */
function parseLimit(v: unknown, path: string): Limit {
  const o = object(v, path, ['method', 'per', 'window', 'count', 'wei'], ['method', 'per', 'window']);
  if (o['count'] === undefined && o['wei'] === undefined) return refuse(`${path}/count`, 'is required (or a budget in wei)');
  const read = readLimit(o);
  if (!read.ok) return refuse(`${path}/${read.field}`, read.problem);
  const { method, per, window } = read.limit;
  return {
    method,
    per,
    windowSeconds: LIMIT_WINDOWS[window],
    ...(read.limit.wei !== undefined ? { wei: read.limit.wei.toString() } : { count: read.limit.count }),
  };
}

/** `{ rules, limits? }` → a policy, or SignerError('invalid_policy') naming the first problem. */
export function parsePolicy(body: unknown): Policy {
  try {
    const p = object(body, '', ['rules', 'limits'], ['rules']);
    const rules = p['rules'];
    if (!Array.isArray(rules) || rules.length > MAX_RULES) return refuse('/rules', `must be a list of at most ${MAX_RULES} rules`);
    const count = { values: 0 };
    const parsed = rules.map((r, i) => parseRule(r, `/rules/${i}`, count));
    const names = new Set<string>();
    parsed.forEach((r, i) => {
      if (names.has(r.name)) refuse(`/rules/${i}/name`, `repeats the rule name ${r.name}`);
      names.add(r.name);
    });
    const limits = p['limits'] ?? [];
    if (!Array.isArray(limits) || limits.length > MAX_LIMITS) return refuse('/limits', `must be a list of at most ${MAX_LIMITS} limits`);
    return { rules: parsed, limits: limits.map((l, i) => parseLimit(l, `/limits/${i}`)) };
  } catch (err) {
    // The shared readers (objects, quantities, addresses) name the path the same way for policies.
    if (err instanceof SignerError && err.code === 'invalid_operation') throw new SignerError('invalid_policy', err.message);
    throw err;
  }
}
