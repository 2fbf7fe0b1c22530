import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import * as ethers from 'ethers';
import fc from 'fast-check';
import { parsePolicy } from '../../../keyvault/policy/document.js';
import { evaluate } from '../../../keyvault/policy/evaluate.js';
import { parseOperation, type Method } from '../../../keyvault/sign/operation.js';
import { keyRequest } from '../../support/keys.js';
import { startSigner, type RunningSigner } from '../../support/signer.js';

/**
 * Deny rules judge the operation that is signed, not its spelling (issue 30). For generated
 * operations of every method, policies with deny rules that hold for the operation (and a broad
 * allow rule that would sign it otherwise), and other requests with the same effect: the hex and
 * text forms of a message, addresses and hex in any case, quantities as numbers, decimals or hex
 * with leading zeros, typed-data integers with a minus sign on hex, text with unpaired surrogates
 * (hashed as U+FFFD), an undeclared EIP712Domain; calldata with trailing bytes, dirty padding in
 * address, bool, uintN, intN and bytesN words, or cut short where the cut bytes were zeros. None
 * is allowed. The same rules as allow rules allow a spelling only when they allow the operation
 * itself, and never a call in a non-canonical encoding. A handful go through the signer process.
 */
const RUNS = Number(process.env['SPELLINGS_RUNS'] ?? 500);
/** A fixed seed by default (a failure shows the same counterexample again); `SPELLINGS_SEED=random` explores further. */
const SEED = process.env['SPELLINGS_SEED'] === 'random' ? Date.now() : Number(process.env['SPELLINGS_SEED'] ?? 20_261_130);
const UINT256_MAX = (1n << 256n) - 1n;

interface ConditionDoc {
  field: string;
  op: string;
  value: unknown;
}
interface RuleDoc {
  name: string;
  action: 'allow' | 'deny';
  method: Method;
  caller?: readonly string[];
  abi?: string;
  conditions: ConditionDoc[];
}
interface Spelling {
  how: string;
  body: unknown;
  /** The same bytes signed; otherwise calldata a Solidity ABI decoder reads as the same call (or reverts on). */
  sameDigest: boolean;
}
interface Case {
  method: Method;
  canonical: unknown;
  spellings: Spelling[];
  /** Deny rules that hold for the operation. */
  deny: RuleDoc[];
  /** Whether a rule names a field the operation has but that cannot be read (message bytes that are not text). */
  unjudgeable: boolean[];
}

// ---- Spellings of one value ------------------------------------------------------------------

const caseMask = fc.array(fc.boolean(), { minLength: 1, maxLength: 7 });
/** Each hex digit upper- or lower-case, by a repeating mask. */
const recase = (digits: string, mask: boolean[]) => [...digits].map((c, i) => (mask[i % mask.length] ? c.toUpperCase() : c.toLowerCase())).join('');
const hexOf = (b: Uint8Array) => `0x${Buffer.from(b).toString('hex')}`;

/** A non-negative quantity as callers write it: decimal, a safe number, or 0x hex with leading zeros in any case. */
function quantityForms(n: bigint, maxDigits = 64): fc.Arbitrary<unknown> {
  const digits = n.toString(16);
  const forms: Array<fc.Arbitrary<unknown>> = [
    fc.constant(n.toString()),
    fc.tuple(fc.integer({ min: 0, max: Math.max(0, maxDigits - digits.length) }), caseMask).map(([z, m]) => `0x${recase('0'.repeat(z) + digits, m)}`),
  ];
  if (n <= BigInt(Number.MAX_SAFE_INTEGER)) forms.push(fc.constant(Number(n)));
  return fc.oneof(...forms);
}

/** An intN of typed data: a negative one as a number, `-decimal` or `-0x…` hex. */
function signedForms(n: bigint): fc.Arbitrary<unknown> {
  if (n >= 0n) return quantityForms(n);
  const m = -n;
  const forms: Array<fc.Arbitrary<unknown>> = [
    fc.constant(`-${m}`),
    quantityForms(m)
      .filter((q) => typeof q === 'string' && q.startsWith('0x'))
      .map((q) => `-${String(q)}`),
  ];
  if (m <= BigInt(Number.MAX_SAFE_INTEGER)) forms.push(fc.constant(-Number(m)));
  return fc.oneof(...forms);
}

const addressForms = (a: string) => fc.constantFrom(a.toLowerCase(), `0x${a.slice(2).toUpperCase()}`, ethers.getAddress(a));
const hexForms = (h: string) => caseMask.map((m) => `0x${recase(h.slice(2), m)}`);

/**
 * Text as a caller may write it for the same UTF-8: each U+FFFD kept or written as an unpaired
 * surrogate (TextEncoder writes those as U+FFFD), never two that would pair.
 */
function textForms(t: string): fc.Arbitrary<string> {
  const parts = t.split('\uFFFD');
  if (parts.length === 1) return fc.constant(t);
  return fc.array(fc.constantFrom('\uFFFD', '\uDFFF', '\uD800'), { minLength: parts.length - 1, maxLength: parts.length - 1 }).map((subs) =>
    parts.reduce((out, part, i) => {
      if (i === 0) return part;
      // A high surrogate directly before a replacement that is a low one would pair with it.
      const next = i < parts.length - 1 && part === '' ? '\uDFFF' : undefined;
      const sub = subs[i - 1] === '\uD800' && next !== undefined ? '\uDFFF' : (subs[i - 1] ?? '\uFFFD');
      return out + sub + part;
    }, ''),
  );
}

const textPiece = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 6 }),
  fc.constantFrom('\uFFFD', '\uFEFF', 'Transfer all funds', 'app.example.com wants you to sign in', '0x', 'é', 'e\u0301', '😀', '\n', 'ab'),
);
const text = fc.array(textPiece, { maxLength: 5 }).map((p) => p.join(''));
const bytesOf = (n: number) => fc.uint8Array({ minLength: n, maxLength: n });
const address = bytesOf(20).map((b) => ethers.getAddress(hexOf(b)));
const uint = (bits: number) => {
  const max = (1n << BigInt(bits)) - 1n;
  return fc.oneof(fc.bigInt({ min: 0n, max: max < 1000n ? max : 1000n }), fc.bigInt({ min: 0n, max }), fc.constant(max));
};
const int = (bits: number) => fc.bigInt({ min: -(1n << BigInt(bits - 1)), max: (1n << BigInt(bits - 1)) - 1n });
/** Code points, so that a prefix never ends inside a surrogate pair. */
const codePointPrefix = (t: string, k: number) => Array.from(t).slice(0, k).join('');

// ---- Conditions that hold for a reading ------------------------------------------------------

type Kind = 'quantity' | 'address' | 'hex' | 'string' | 'boolean';
interface Reading {
  field: string;
  kind: Kind;
  /** undefined: the operation has the field but it cannot be read as its kind. */
  value: bigint | string | boolean | undefined;
  /** A typed message's leaf: values may be written as strings, numbers or booleans only. */
  leaf?: boolean;
  /** The field's width in bits, for the bounds of order conditions. */
  bits?: number;
}

/** A quantity as a policy may write it (negative ones as decimal strings). */
function policyQuantity(n: bigint, leaf: boolean): fc.Arbitrary<unknown> {
  if (n < 0n) return fc.constant(n.toString());
  const forms: Array<fc.Arbitrary<unknown>> = [fc.constant(n.toString())];
  if (n <= BigInt(Number.MAX_SAFE_INTEGER)) forms.push(fc.constant(Number(n)));
  if (leaf || n > 0n) forms.push(fc.constant(`0x${n.toString(16)}`));
  return fc.oneof(...forms);
}
const clamp = (n: bigint) => (n > UINT256_MAX ? UINT256_MAX : n < -(1n << 255n) ? -(1n << 255n) : n);

/** A condition on `r` that holds for it; for an unreadable field, any condition (it cannot be judged). */
function holding(r: Reading): fc.Arbitrary<ConditionDoc> {
  const c = (op: string, value: fc.Arbitrary<unknown>) => value.map((v) => ({ field: r.field, op, value: v }));
  const leaf = r.leaf ?? false;
  const v = r.value;
  if (v === undefined) return fc.oneof(c('eq', text), c('prefix', text), c('neq', text), c('in', fc.array(text, { minLength: 1, maxLength: 2 })));
  if (typeof v === 'boolean') return fc.oneof(c('eq', fc.constant(v)), c('neq', fc.constant(!v)));
  if (typeof v === 'bigint') {
    const q = (n: bigint) => policyQuantity(clamp(n), leaf || n < 0n);
    const other = v === UINT256_MAX ? v - 1n : v + 1n;
    // Quantities of catalogue fields are unsigned: a negative bound is written as a decimal string.
    return fc.oneof(
      c('eq', q(v)),
      c('in', fc.tuple(q(other), q(v))),
      c('neq', q(other)),
      c('not_in', fc.tuple(q(other))),
      fc.bigInt({ min: 0n, max: 1n << 70n }).chain((k) => c('lte', q(v + k))),
      fc.bigInt({ min: 0n, max: 1n << 70n }).chain((k) => c('gte', q(v - k))),
      ...(v < UINT256_MAX ? [fc.bigInt({ min: 1n, max: 1n << 70n }).chain((k) => c('lt', q(v + k)))] : []),
      fc.bigInt({ min: 1n, max: 1n << 70n }).chain((k) => c('gt', q(v - k))),
    );
  }
  if (r.kind === 'address') {
    const other = `0x${v.slice(2, 41)}${v.endsWith('0') ? '1' : '0'}`;
    return fc.oneof(
      c('eq', addressForms(v)),
      c('in', fc.tuple(fc.constant(other), addressForms(v))),
      c('neq', fc.constant(other)),
      c('not_in', fc.constant([other])),
    );
  }
  if (r.kind === 'hex') {
    const other = `${v}00`;
    const bytes = (v.length - 2) / 2;
    // A typed leaf's prefix may end inside a byte; the catalogue's hex fields take whole bytes.
    const prefix = leaf ? fc.nat(v.length - 2).map((k) => v.slice(0, 2 + k)) : fc.nat(bytes).map((k) => v.slice(0, 2 + 2 * k));
    return fc.oneof(
      c('eq', hexForms(v)),
      c('in', fc.tuple(fc.constant(other), hexForms(v))),
      c('neq', fc.constant(other)),
      c('not_in', fc.constant([other])),
      c('prefix', prefix.chain(hexForms)),
    );
  }
  const other = `${v}x`;
  return fc.oneof(
    c('eq', fc.constant(v)),
    c('in', fc.constant([other, v])),
    c('neq', fc.constant(other)),
    c('not_in', fc.constant([other])),
    c(
      'prefix',
      fc.nat(Array.from(v).length).map((k) => codePointPrefix(v, k)),
    ),
  );
}

const callers = fc.option(fc.constantFrom(['user'], ['user', 'server']), { nil: undefined });

/** Deny rules (one or two) whose conditions hold for the readings; `abi` rules may add argument conditions. */
function denyRules(method: Method, readings: Reading[], call?: { abi: string; args: Reading[] }): fc.Arbitrary<{ rules: RuleDoc[]; unjudgeable: boolean[] }> {
  const rule = (i: number) =>
    fc
      .record({
        withAbi: call ? fc.boolean() : fc.constant(false),
        fields: fc.subarray(readings, { maxLength: Math.min(3, readings.length) }),
        args: fc.subarray(call?.args ?? [], { maxLength: Math.min(2, call?.args.length ?? 0) }),
        caller: callers,
      })
      .filter((r) => r.fields.length > 0 || r.withAbi)
      .chain((r) => {
        const named = [...r.fields, ...(r.withAbi ? r.args : [])];
        return fc.tuple(...named.map(holding)).map((conditions) => ({
          rule: {
            name: `deny ${i}`,
            action: 'deny' as const,
            method,
            ...(r.caller ? { caller: r.caller } : {}),
            ...(r.withAbi && call ? { abi: call.abi } : {}),
            conditions,
          },
          unjudgeable: named.some((n) => n.value === undefined),
        }));
      });
  return fc.oneof(
    rule(0).map((a) => ({ rules: [a.rule], unjudgeable: [a.unjudgeable] })),
    fc.tuple(rule(0), rule(1)).map(([a, b]) => ({ rules: [a.rule, b.rule], unjudgeable: [a.unjudgeable, b.unjudgeable] })),
  );
}

/** Rules that would sign any operation of the method (an authorization for any chain needs a rule naming chain 0). */
const broadAllow = (method: Method): RuleDoc[] => [
  { name: 'anything', action: 'allow', method, conditions: [] },
  ...(method === 'eth_signAuthorization'
    ? [{ name: 'any chain', action: 'allow' as const, method, conditions: [{ field: 'chainId', op: 'in', value: [0] }] }]
    : []),
];

const spellings = (forms: fc.Arbitrary<Spelling>) => fc.array(forms, { minLength: 1, maxLength: 4 });

// ---- personal_sign ---------------------------------------------------------------------------

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const textOf = (b: Uint8Array): string | undefined => {
  try {
    return UTF8.decode(b);
  } catch {
    return undefined;
  }
};
const HEX_MESSAGE = /^0x([0-9a-fA-F]{2})*$/;

const messageBytes = fc.oneof(
  text.map((t) => new TextEncoder().encode(t)),
  fc.uint8Array({ maxLength: 40 }),
  // Text with one byte that breaks its UTF-8 somewhere.
  fc.tuple(text, fc.integer({ min: 0x80, max: 0xff }), fc.nat()).map(([t, b, at]) => {
    const bytes = [...new TextEncoder().encode(t)];
    bytes.splice(at % (bytes.length + 1), 0, b);
    return Uint8Array.from(bytes);
  }),
);

const personalCase: fc.Arbitrary<Case> = messageBytes.chain((bytes) => {
  const t = textOf(bytes);
  const asText = t !== undefined && !HEX_MESSAGE.test(t);
  const body = (message: string) => ({ method: 'personal_sign', params: { message } });
  const forms: Array<fc.Arbitrary<Spelling>> = [hexForms(hexOf(bytes)).map((m) => ({ how: `hex ${m}`, body: body(m), sameDigest: true }))];
  if (asText) forms.push(textForms(t).map((m) => ({ how: `text ${JSON.stringify(m)}`, body: body(m), sameDigest: true })));
  const readings: Reading[] = [
    { field: 'message', kind: 'string', value: t },
    { field: 'length', kind: 'quantity', value: BigInt(bytes.length) },
    { field: 'isHex', kind: 'boolean', value: t === undefined },
  ];
  return fc.record({ s: spellings(fc.oneof(...forms)), deny: denyRules('personal_sign', readings) }).map(({ s, deny }) => ({
    method: 'personal_sign' as const,
    canonical: body(asText ? t : hexOf(bytes)),
    spellings: s,
    deny: deny.rules,
    unjudgeable: deny.unjudgeable,
  }));
});

// ---- eth_signTypedData_v4 --------------------------------------------------------------------

const DOMAIN_TYPE = [
  { name: 'name', type: 'string' },
  { name: 'version', type: 'string' },
  { name: 'chainId', type: 'uint256' },
  { name: 'verifyingContract', type: 'address' },
];
const ORDER = [
  { name: 'maker', type: 'address' },
  { name: 'amount', type: 'uint256' },
  { name: 'delta', type: 'int64' },
  { name: 'small', type: 'uint8' },
  { name: 'flag', type: 'bool' },
  { name: 'tag', type: 'bytes4' },
  { name: 'data', type: 'bytes' },
  { name: 'note', type: 'string' },
  { name: 'inner', type: 'Inner' },
  { name: 'list', type: 'int256[]' },
];
const INNER = [
  { name: 'who', type: 'address' },
  { name: 'value', type: 'int256' },
];

const typedEffect = fc.record({
  name: text,
  version: fc.constantFrom('1', '2', 'v\uFFFD'),
  chainId: uint(256),
  verifyingContract: address,
  maker: address,
  amount: uint(256),
  delta: int(64),
  small: uint(8),
  flag: fc.boolean(),
  tag: bytesOf(4).map(hexOf),
  data: fc.uint8Array({ maxLength: 40 }).map(hexOf),
  note: text,
  who: address,
  value: int(256),
  list: fc.array(int(256), { maxLength: 3 }),
});
type TypedEffect = typeof typedEffect extends fc.Arbitrary<infer T> ? T : never;

const typedCase: fc.Arbitrary<Case> = typedEffect.chain((e) => {
  const typedData = (
    domain: Record<string, unknown>,
    message: Record<string, unknown>,
    declareDomain: boolean,
    innerFirst: boolean,
  ): Record<string, unknown> => ({
    method: 'eth_signTypedData_v4',
    params: {
      typedData: {
        types: innerFirst
          ? { Inner: INNER, Order: ORDER, ...(declareDomain ? { EIP712Domain: DOMAIN_TYPE } : {}) }
          : { ...(declareDomain ? { EIP712Domain: DOMAIN_TYPE } : {}), Order: ORDER, Inner: INNER },
        primaryType: 'Order',
        domain,
        message,
      },
    },
  });
  const canonicalMessage = (x: TypedEffect) => ({
    maker: x.maker,
    amount: x.amount.toString(),
    delta: x.delta.toString(),
    small: Number(x.small),
    flag: x.flag,
    tag: x.tag,
    data: x.data,
    note: x.note,
    inner: { who: x.who, value: x.value.toString() },
    list: x.list.map(String),
  });
  const canonical = typedData(
    { name: e.name, version: e.version, chainId: e.chainId.toString(), verifyingContract: e.verifyingContract },
    canonicalMessage(e),
    true,
    false,
  );
  const respelled = fc
    .record({
      domain: fc.record({
        name: textForms(e.name),
        version: textForms(e.version),
        chainId: quantityForms(e.chainId),
        verifyingContract: addressForms(e.verifyingContract),
      }),
      message: fc.record({
        maker: addressForms(e.maker),
        amount: quantityForms(e.amount),
        delta: signedForms(e.delta),
        small: quantityForms(e.small),
        flag: fc.constant(e.flag),
        tag: hexForms(e.tag),
        data: hexForms(e.data),
        note: textForms(e.note),
        inner: fc.record({ who: addressForms(e.who), value: signedForms(e.value) }),
        list: fc.tuple(...e.list.map(signedForms)),
      }),
      declareDomain: fc.boolean(),
      innerFirst: fc.boolean(),
    })
    .map((s) => ({ how: JSON.stringify(s), body: typedData(s.domain, s.message, s.declareDomain, s.innerFirst), sameDigest: true }));
  const leaf = (field: string, kind: Kind, value: bigint | string | boolean): Reading => ({ field: `message.${field}`, kind, value, leaf: true });
  const readings: Reading[] = [
    { field: 'primaryType', kind: 'string', value: 'Order' },
    { field: 'domain.name', kind: 'string', value: e.name },
    { field: 'domain.version', kind: 'string', value: e.version },
    { field: 'domain.chainId', kind: 'quantity', value: e.chainId },
    { field: 'domain.verifyingContract', kind: 'address', value: e.verifyingContract.toLowerCase() },
    leaf('maker', 'address', e.maker.toLowerCase()),
    leaf('amount', 'quantity', e.amount),
    leaf('delta', 'quantity', e.delta),
    leaf('small', 'quantity', e.small),
    leaf('flag', 'boolean', e.flag),
    leaf('tag', 'hex', e.tag),
    leaf('data', 'hex', e.data),
    leaf('note', 'string', e.note),
    leaf('inner.who', 'address', e.who.toLowerCase()),
    leaf('inner.value', 'quantity', e.value),
    ...e.list.map((v, i) => leaf(`list.${i}`, 'quantity', v)),
  ];
  return fc.record({ s: spellings(respelled), deny: denyRules('eth_signTypedData_v4', readings) }).map(({ s, deny }) => ({
    method: 'eth_signTypedData_v4' as const,
    canonical,
    spellings: s,
    deny: deny.rules,
    unjudgeable: deny.unjudgeable,
  }));
});

// ---- eth_signTransaction ---------------------------------------------------------------------

const FUNCTIONS = ['transfer(address,uint256)', 'approve(address,uint256)', 'configure(bool,uint8,int16,address,uint96,bytes4)'];
const argOf = (type: string): fc.Arbitrary<bigint | string | boolean> => {
  if (type === 'address') return address;
  if (type === 'bool') return fc.boolean();
  if (type.startsWith('bytes')) return bytesOf(Number(type.slice(5))).map(hexOf);
  const bits = Number(type.replace(/^u?int/, ''));
  // Amounts such as 10^18 end in zero bytes: a call cut short there reads the same where calldata is padded with zeros.
  if (type.startsWith('uint'))
    return fc.oneof(
      uint(bits),
      fc.nat(Math.floor((bits * 3) / 10)).map((k) => 10n ** BigInt(k)),
    );
  return int(bits);
};
const kindOfArg = (type: string): Kind => (type === 'address' ? 'address' : type === 'bool' ? 'boolean' : type.startsWith('bytes') ? 'hex' : 'quantity');

/**
 * The calldata in encodings Solidity's ABI decoder reads as the same call: trailing bytes (always
 * ignored); dirty padding of an address, a true bool, a uintN, an intN or a bytesN (cleaned by
 * ABI coder v1, where v2 reverts); the trailing zero bytes cut (read as zeros before Solidity 0.5).
 */
function dirtyCalls(signature: string, args: Array<bigint | string | boolean>, data: string): Array<fc.Arbitrary<{ how: string; data: string }>> {
  const types = signature.slice(signature.indexOf('(') + 1, -1).split(',');
  const words = Array.from({ length: types.length }, (_, i) => data.slice(10 + 64 * i, 74 + 64 * i));
  const withWord = (i: number, w: string) => `${data.slice(0, 10)}${words.map((x, j) => (j === i ? w : x)).join('')}`;
  const out: Array<fc.Arbitrary<{ how: string; data: string }>> = [
    fc.uint8Array({ minLength: 1, maxLength: 40 }).map((t) => ({ how: `${t.length} trailing bytes`, data: `${data}${hexOf(t).slice(2)}` })),
  ];
  // Zero bytes at the end, cut to no less than the selector.
  const cuttable = Math.min((/(00)*$/.exec(data)?.[0].length ?? 0) / 2, (data.length - 10) / 2);
  if (cuttable >= 1) out.push(fc.integer({ min: 1, max: cuttable }).map((k) => ({ how: `${k} zero bytes cut`, data: data.slice(0, data.length - 2 * k) })));
  types.forEach((type, i) => {
    const word = BigInt(`0x${words[i]}`);
    const dirty = (how: string, w: fc.Arbitrary<bigint>) =>
      out.push(w.map((n) => ({ how: `${how} in argument ${i}`, data: withWord(i, n.toString(16).padStart(64, '0')) })));
    const high = (bits: number) => fc.bigInt({ min: 1n, max: (1n << BigInt(256 - bits)) - 1n }).map((h) => h << BigInt(bits));
    if (type === 'address')
      dirty(
        'dirty high bits',
        high(160).map((h) => h | word),
      );
    else if (type === 'bool' && args[i] === true) dirty('a true other than 1', fc.bigInt({ min: 2n, max: UINT256_MAX }));
    else if (type.startsWith('bytes') && type !== 'bytes32')
      dirty(
        'dirty low bytes',
        fc.bigInt({ min: 1n, max: (1n << BigInt(256 - 8 * Number(type.slice(5)))) - 1n }).map((l) => word | l),
      );
    else if (/^u?int/.test(type) && !type.endsWith('256')) {
      const bits = Number(type.replace(/^u?int/, ''));
      const low = word & ((1n << BigInt(bits)) - 1n);
      // Any high bits but the clean ones (zeros for uintN, the sign's copies for intN).
      dirty(
        'dirty high bits',
        high(bits)
          .map((h) => h | low)
          .filter((n) => n !== word),
      );
    }
  });
  return out;
}

const UINT256 = (1n << 256n) - 1n;

/** A transaction of either method: a send also says why it is signed, and reads `purpose`. */
const transactionCaseOf = (method: 'eth_signTransaction' | 'eth_sendTransaction'): fc.Arbitrary<Case> =>
  fc
    .record({
      type: fc.constantFrom(0, 1, 2),
      chainId: fc.oneof(fc.constantFrom(1n, 8453n), fc.bigInt({ min: 1n, max: (1n << 64n) - 1n })),
      nonce: uint(64),
      gas: fc.bigInt({ min: 21_000n, max: 30_000_000n }),
      fee: uint(80),
      tip: uint(40),
      to: address,
      value: fc.oneof(fc.constant(0n), uint(256)),
      fn: fc.constantFrom(...FUNCTIONS),
    })
    .chain((t) => {
      const types = t.fn.slice(t.fn.indexOf('(') + 1, -1).split(',');
      return fc.tuple(...types.map(argOf)).map((args) => ({ ...t, types, args }));
    })
    .chain((t) => {
      const data = new ethers.Interface([`function ${t.fn}`]).encodeFunctionData(t.fn.slice(0, t.fn.indexOf('(')), t.args);
      const fees = t.type === 2 ? { maxFeePerGas: t.fee + t.tip, maxPriorityFeePerGas: t.tip } : { gasPrice: t.fee };
      const body = (tx: Record<string, unknown>) => ({ method, params: { transaction: tx, ...(method === 'eth_sendTransaction' ? { purpose: 'send' } : {}) } });
      const canonical = body({
        type: t.type,
        chainId: t.chainId.toString(),
        nonce: t.nonce.toString(),
        gas: t.gas.toString(),
        ...Object.fromEntries(Object.entries(fees).map(([k, v]) => [k, v.toString()])),
        to: t.to,
        value: t.value.toString(),
        data,
      });
      // The same transaction respelled field by field; `data` given, or a non-canonical encoding of the call.
      const respelled = (calldata: fc.Arbitrary<{ how: string; data: string }>, sameDigest: boolean) =>
        fc
          .record({
            type: t.type === 2 ? fc.constantFrom(undefined, 2, '2', '0x2', '0x02') : quantityForms(BigInt(t.type), 2),
            chainId: quantityForms(t.chainId, 16),
            nonce: quantityForms(t.nonce, 16),
            gas: quantityForms(t.gas, 16),
            fees: fc.tuple(...Object.values(fees).map((v) => quantityForms(v))),
            to: addressForms(t.to),
            value: t.value === 0n ? fc.constantFrom(undefined, 0, '0', '0x0', '0x00') : quantityForms(t.value),
            accessList: t.type === 0 ? fc.constant(undefined) : fc.constantFrom(undefined, []),
            call: calldata,
            mask: caseMask,
          })
          .map((s) => ({
            how: `${s.call.how}: ${JSON.stringify(s)}`,
            body: body({
              ...(s.type === undefined ? {} : { type: s.type }),
              chainId: s.chainId,
              nonce: s.nonce,
              gas: s.gas,
              ...Object.fromEntries(Object.keys(fees).map((k, i) => [k, s.fees[i]])),
              to: s.to,
              ...(s.value === undefined ? {} : { value: s.value }),
              ...(s.accessList === undefined ? {} : { accessList: s.accessList }),
              data: `0x${recase(s.call.data.slice(2), s.mask)}`,
            }),
            sameDigest,
          }));
      const forms = [respelled(fc.constant({ how: 'canonical calldata', data }), true), ...dirtyCalls(t.fn, t.args, data).map((d) => respelled(d, false))];
      const readings: Reading[] = [
        { field: 'type', kind: 'quantity', value: BigInt(t.type) },
        { field: 'chainId', kind: 'quantity', value: t.chainId },
        { field: 'nonce', kind: 'quantity', value: t.nonce },
        { field: 'gas', kind: 'quantity', value: t.gas },
        ...Object.entries(fees).map(([k, v]): Reading => ({ field: k, kind: 'quantity', value: v })),
        { field: 'to', kind: 'address', value: t.to.toLowerCase() },
        { field: 'value', kind: 'quantity', value: t.value },
        { field: 'data.selector', kind: 'hex', value: data.slice(0, 10) },
        // Cut at 2^256 − 1, as the signer reads it.
        { field: 'maxCost', kind: 'quantity', value: [t.gas * (t.type === 2 ? t.fee + t.tip : t.fee) + t.value].map((c) => (c > UINT256 ? UINT256 : c))[0]! },
        ...(method === 'eth_sendTransaction' ? [{ field: 'purpose', kind: 'string', value: 'send' } satisfies Reading] : []),
      ];
      const args = t.args.map((v, i): Reading => {
        const kind = kindOfArg(t.types[i] ?? '');
        return { field: `data.args.${i}`, kind, value: typeof v === 'string' ? v.toLowerCase() : v };
      });
      return fc.record({ s: spellings(fc.oneof(...forms)), deny: denyRules(method, readings, { abi: t.fn, args }) }).map(({ s, deny }) => ({
        method,
        canonical,
        spellings: s,
        deny: deny.rules,
        unjudgeable: deny.unjudgeable,
      }));
    });

// ---- eth_signAuthorization -------------------------------------------------------------------

const authorizationCase: fc.Arbitrary<Case> = fc
  .record({ chainId: fc.oneof(fc.constant(0n), fc.constant(8453n), uint(256)), address, nonce: uint(64) })
  .chain((a) => {
    const body = (p: Record<string, unknown>) => ({ method: 'eth_signAuthorization', params: p });
    const respelled = fc
      .record({ chainId: quantityForms(a.chainId), address: addressForms(a.address), nonce: quantityForms(a.nonce, 16) })
      .map((p) => ({ how: JSON.stringify(p), body: body(p), sameDigest: true }));
    const readings: Reading[] = [
      { field: 'chainId', kind: 'quantity', value: a.chainId },
      { field: 'address', kind: 'address', value: a.address.toLowerCase() },
      { field: 'nonce', kind: 'quantity', value: a.nonce },
    ];
    return fc.record({ s: spellings(respelled), deny: denyRules('eth_signAuthorization', readings) }).map(({ s, deny }) => ({
      method: 'eth_signAuthorization' as const,
      canonical: body({ chainId: a.chainId.toString(), address: a.address, nonce: a.nonce.toString() }),
      spellings: s,
      deny: deny.rules,
      unjudgeable: deny.unjudgeable,
    }));
  });

const CASES: Record<Method, fc.Arbitrary<Case>> = {
  personal_sign: personalCase,
  eth_signTypedData_v4: typedCase,
  eth_signTransaction: transactionCaseOf('eth_signTransaction'),
  eth_sendTransaction: transactionCaseOf('eth_sendTransaction'),
  eth_signAuthorization: authorizationCase,
};

// ---- The properties --------------------------------------------------------------------------

const digestOf = (body: unknown) => Buffer.from(parseOperation(body).digest).toString('hex');
const decide = (rules: RuleDoc[], body: unknown) => evaluate(parsePolicy({ rules }), parseOperation(body), 'user');

/** Deny rules and a broad allow: the operation and every spelling of it denied, by a deny rule. */
function checkDenied(c: Case): void {
  const broad = broadAllow(c.method);
  const names = c.deny.map((r) => r.name);
  expect(decide(broad, c.canonical).allowed, 'the broad rule alone allows the operation').to.equal(true);
  const denied = decide([...c.deny, ...broad], c.canonical);
  expect(denied.allowed, 'the operation is denied').to.equal(false);
  expect(names).to.include(denied.rule);
  for (const s of c.spellings) {
    expect(decide(broad, s.body).allowed, `the broad rule alone allows ${s.how}`).to.equal(true);
    const d = decide([...c.deny, ...broad], s.body);
    if (s.sameDigest) {
      expect(digestOf(s.body), `${s.how} signs the same digest`).to.equal(digestOf(c.canonical));
      expect(d, `${s.how} is decided as the operation`).to.deep.equal(denied);
    }
    expect(d.allowed, `${s.how} is denied`).to.equal(false);
    expect(names, s.how).to.include(d.rule);
  }
}

/** The same rules as allow rules: a spelling is allowed only as the operation is, a non-canonical call never. */
function checkAllowNotWidened(c: Case): void {
  const rules = c.deny.map((r) => ({ ...r, action: 'allow' as const }));
  const d = decide(rules, c.canonical);
  // A rule naming a field it cannot read does not allow; any other holds, as it was made to (an
  // authorization for any chain aside: it needs a rule naming chain 0).
  if (c.unjudgeable.every(Boolean)) expect(d.allowed, 'no rule that cannot read its field allows').to.equal(false);
  else if (c.method !== 'eth_signAuthorization') expect(d.allowed, 'the operation is allowed').to.equal(true);
  for (const s of c.spellings) {
    const e = decide(rules, s.body);
    if (s.sameDigest) expect(e, s.how).to.deep.equal(d);
    if (e.allowed) expect(d.allowed, `${s.how} allowed where the operation is not`).to.equal(true);
    // A rule without an abi reads only fields the calldata's encoding does not change.
    if (!s.sameDigest)
      expect(e.allowed && rules.find((r) => r.name === e.rule)?.abi !== undefined, `${s.how} allowed by a rule about the call`).to.equal(false);
  }
}

describe('signing policies: deny rules judge the operation signed, not its spelling', function () {
  this.timeout(120_000);
  for (const method of Object.keys(CASES) as Method[]) {
    const cases = CASES[method];
    it(`${method}: ${RUNS} operations under deny rules, none of their other spellings allowed`, () => {
      fc.assert(fc.property(cases, checkDenied), { numRuns: RUNS, seed: SEED, endOnFailure: true });
    });
    it(`${method}: ${RUNS} operations under the same rules as allow rules, no spelling allowed beyond the operation`, () => {
      fc.assert(fc.property(cases, checkAllowNotWidened), { numRuns: RUNS, seed: SEED, endOnFailure: true });
    });
  }
});

// ---- Through the signer process --------------------------------------------------------------

async function call(s: RunningSigner, method: string, p: string, body?: unknown) {
  const headers: Record<string, string> = { authorization: `Bearer ${s.token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${s.url}${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const BOB = '0x0000000000000000000000000000000000000B0B';
const USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const word = (hex: string) => hex.replace(/^0x/, '').toLowerCase().padStart(64, '0');
const transfer = (to: string, amount: bigint) => `0xa9059cbb${word(to)}${word(amount.toString(16))}`;
const transferTx = (data: string) => ({
  method: 'eth_signTransaction',
  params: { transaction: { chainId: 8453, nonce: 1, gas: 60000, maxFeePerGas: '1000', maxPriorityFeePerGas: '1', to: USDC, data } },
});
const DENIED_TEXT = 'Transfer all funds to 0x0000000000000000000000000000000000000B0B';

/** The two findings of the review: the first operation is what the rules deny, the others its spellings that were signed. */
const FINDINGS: Array<{ what: string; rules: RuleDoc[]; denied: unknown[] }> = [
  {
    what: 'personal_sign of the hex bytes of a denied text',
    rules: [
      {
        name: 'no transfers by message',
        action: 'deny',
        method: 'personal_sign',
        conditions: [{ field: 'message', op: 'prefix', value: 'Transfer all funds' }],
      },
      { name: 'any message', action: 'allow', method: 'personal_sign', conditions: [] },
    ],
    denied: [DENIED_TEXT, hexOf(new TextEncoder().encode(DENIED_TEXT)), hexOf(new TextEncoder().encode(DENIED_TEXT)).toUpperCase().replace('0X', '0x')].map(
      (m) => ({
        method: 'personal_sign',
        params: { message: m },
      }),
    ),
  },
  {
    what: 'an ERC-20 transfer with a trailing byte, dirty address bits or cut short',
    rules: [
      {
        name: 'never Bob',
        action: 'deny',
        method: 'eth_signTransaction',
        abi: 'transfer(address,uint256)',
        conditions: [{ field: 'data.args.0', op: 'eq', value: BOB }],
      },
      { name: 'USDC', action: 'allow', method: 'eth_signTransaction', conditions: [{ field: 'to', op: 'eq', value: USDC }] },
    ],
    denied: [
      transfer(BOB, 10n ** 18n),
      `${transfer(BOB, 10n ** 18n)}00`,
      transfer(BOB, 10n ** 18n).replace(`000000000000000000000000${word(BOB).slice(24)}`, `ffffffffffffffffffffffff${word(BOB).slice(24)}`),
      transfer(BOB, 10n ** 18n).slice(0, -4),
    ].map(transferTx),
  },
];

describe('signing policies: spellings of denied operations through the signer process', function () {
  this.timeout(120_000);
  let signer: RunningSigner;
  before(async () => {
    signer = await startSigner();
  });
  after(() => signer.destroy());

  /** A key of a new project whose policy is first `allowed` alone (the operation signs), then `deny` before it. */
  async function refusedThroughSigner(method: string, allowed: RuleDoc[], deny: RuleDoc[], operation: unknown, spelled: unknown[]): Promise<void> {
    const projectId = randomUUID();
    const key = await call(signer, 'POST', '/v1/keys', keyRequest(`spellings:${projectId}`, projectId));
    expect(key.status, JSON.stringify(key.body)).to.equal(201);
    const sign = (op: unknown) => call(signer, 'POST', `/v1/keys/${String(key.body['keyId'])}/sign`, { projectId, caller: 'user', operation: op });
    expect((await call(signer, 'PUT', `/v1/projects/${projectId}/policy`, { baseVersion: 0, policy: { rules: allowed } })).status).to.equal(201);
    const signed = await sign(operation);
    expect(signed.status, `${method} signs under the allow rule alone: ${JSON.stringify(signed.body)}`).to.equal(200);
    expect((await call(signer, 'PUT', `/v1/projects/${projectId}/policy`, { baseVersion: 1, policy: { rules: [...deny, ...allowed] } })).status).to.equal(201);
    for (const body of [operation, ...spelled]) {
      const r = await sign(body);
      expect(r.status, `${method}: ${JSON.stringify(body)} → ${JSON.stringify(r.body)}`).to.equal(403);
      expect(r.body['code']).to.equal('policy_denied');
      expect(deny.map((d) => d.name)).to.include(r.body['rule']);
    }
  }

  for (const f of FINDINGS) {
    it(`refuses ${f.what}`, async () => {
      const [operation, ...spelled] = f.denied;
      await refusedThroughSigner(
        f.what,
        f.rules.filter((r) => r.action === 'allow'),
        f.rules.filter((r) => r.action === 'deny'),
        operation,
        spelled,
      );
    });
  }

  it('refuses generated spellings of denied operations, three per method', async () => {
    for (const method of Object.keys(CASES) as Method[]) {
      for (const c of fc.sample(CASES[method], { numRuns: 3, seed: SEED })) {
        await refusedThroughSigner(
          method,
          broadAllow(c.method),
          c.deny,
          c.canonical,
          c.spellings.map((s) => s.body),
        );
      }
    }
  });
});
