import { keccak_256 } from '@noble/hashes/sha3.js';
import { LIMITS } from '../limits.js';
import { word } from './ecdsa.js';
import { hex, hexBytes, lowerAddress, object, quantity, refuse, signedText, type Json } from './input.js';
import { Meter } from './meter.js';

/**
 * EIP-712 (`eth_signTypedData_v4`), written from the specification: the type grammar is checked
 * before anything is hashed, every value is checked against its declared type (no coercion, no
 * missing or unknown fields), and the work one request may ask for is bounded (LIMITS.typedData),
 * each bound checked as the walk reaches it, before the work it bounds.
 */
export interface TypedField {
  name: string;
  type: string;
}

export interface TypedData {
  /** Every struct type but EIP712Domain. */
  types: Map<string, TypedField[]>;
  domainType: TypedField[];
  domain: Json;
  primaryType: string;
  message: Json;
}

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]{0,63}$/;
/** A field's type: a name and at most as many array suffixes as arrays may nest. */
const FIELD_TYPE = /^([A-Za-z_$][A-Za-z0-9_$]{0,63})((?:\[[0-9]{0,4}\]){0,16})$/;
const { types: MAX_TYPES, fieldsPerType: MAX_FIELDS, arrayLength: MAX_ARRAY, depth: MAX_DEPTH, values: MAX_VALUES } = LIMITS.typedData;

/** The domain's fields in the order EIP-712 gives them, with their types. */
const DOMAIN_FIELDS: TypedField[] = [
  { name: 'name', type: 'string' },
  { name: 'version', type: 'string' },
  { name: 'chainId', type: 'uint256' },
  { name: 'verifyingContract', type: 'address' },
  { name: 'salt', type: 'bytes32' },
];

const atomicOrDynamic = (base: string): boolean => {
  if (base === 'address' || base === 'bool' || base === 'string' || base === 'bytes') return true;
  const sized = /^(u?int)([0-9]{1,3})$/.exec(base);
  if (sized) {
    const bits = Number(sized[2]);
    return bits >= 8 && bits <= 256 && bits % 8 === 0 && String(bits) === sized[2];
  }
  const bytes = /^bytes([0-9]{1,2})$/.exec(base);
  return bytes !== null && Number(bytes[1]) >= 1 && Number(bytes[1]) <= 32 && String(Number(bytes[1])) === bytes[1];
};

function parseFields(v: unknown, path: string): TypedField[] {
  if (!Array.isArray(v)) return refuse(path, 'must be an array of { name, type }');
  if (v.length > MAX_FIELDS) refuse(path, `has more than ${MAX_FIELDS} fields`);
  const seen = new Set<string>();
  return v.map((f, i) => {
    const o = object(f, `${path}/${i}`, ['name', 'type'], ['name', 'type']);
    const { name, type } = o;
    if (typeof name !== 'string' || !IDENT.test(name)) return refuse(`${path}/${i}/name`, 'must be an identifier');
    if (typeof type !== 'string' || !FIELD_TYPE.test(type)) return refuse(`${path}/${i}/type`, 'must be a type name, optionally with array suffixes');
    if (seen.has(name)) refuse(`${path}/${i}/name`, `repeats the field ${name}`);
    seen.add(name);
    return { name, type };
  });
}

/** `{ typedData: { domain, types, primaryType, message } }`, checked, with its digest (the work counted on `meter`). */
export function parseTypedData(params: unknown, meter: Meter = new Meter()): TypedData & { digest: Uint8Array } {
  const p = object(params, '/params', ['typedData'], ['typedData']);
  const path = '/params/typedData';
  const td = object(p['typedData'], path, ['domain', 'types', 'primaryType', 'message'], ['domain', 'types', 'primaryType', 'message']);
  const rawTypes = td['types'];
  if (typeof rawTypes !== 'object' || rawTypes === null || Array.isArray(rawTypes)) return refuse(`${path}/types`, 'must be an object');
  // Counted before anything is read of them: a hostile request may declare a hundred thousand.
  const names: string[] = [];
  for (const name in rawTypes) if (names.push(name) > MAX_TYPES) refuse(`${path}/types`, `has more than ${MAX_TYPES} types`);
  const types = new Map<string, TypedField[]>();
  let declaredDomain: TypedField[] | undefined;
  for (const name of names) {
    if (!IDENT.test(name) || atomicOrDynamic(name)) refuse(`${path}/types/${name.slice(0, 64)}`, 'is not a valid struct name');
    const fields = parseFields((rawTypes as Json)[name], `${path}/types/${name}`);
    if (name === 'EIP712Domain') declaredDomain = fields;
    else types.set(name, fields);
  }
  for (const [name, fields] of types)
    fields.forEach((f, i) => {
      const base = FIELD_TYPE.exec(f.type)?.[1] ?? '';
      if (!atomicOrDynamic(base) && !types.has(base)) refuse(`${path}/types/${name}/${i}/type`, `names an unknown type ${base}`);
    });

  const domain = object(
    td['domain'],
    `${path}/domain`,
    DOMAIN_FIELDS.map((f) => f.name),
  );
  let domainType: TypedField[];
  if (declaredDomain) {
    for (const [i, f] of declaredDomain.entries()) {
      const standard = DOMAIN_FIELDS.find((d) => d.name === f.name);
      if (!standard || standard.type !== f.type) refuse(`${path}/types/EIP712Domain/${i}`, `must be one of EIP-712's domain fields with its type`);
      if (domain[f.name] === undefined) refuse(`${path}/domain/${f.name}`, 'is declared in EIP712Domain but missing');
    }
    for (const k of Object.keys(domain)) if (!declaredDomain.some((f) => f.name === k)) refuse(`${path}/domain/${k}`, 'is not declared in EIP712Domain');
    domainType = declaredDomain;
  } else {
    domainType = DOMAIN_FIELDS.filter((f) => domain[f.name] !== undefined);
  }
  const primaryType = td['primaryType'];
  if (typeof primaryType !== 'string' || !types.has(primaryType)) return refuse(`${path}/primaryType`, 'must name one of the types (not EIP712Domain)');
  const message = object(
    td['message'],
    `${path}/message`,
    (types.get(primaryType) ?? []).map((f) => f.name),
  );
  const data = { types, domainType, domain, primaryType, message };
  // Every value is checked as it is hashed, here: an invalid one is refused before any key is touched.
  return { ...data, digest: typedDataDigest(data, meter) };
}

function dependencies(types: Map<string, TypedField[]>, primary: string, found = new Set<string>()): Set<string> {
  if (found.has(primary) || !types.has(primary)) return found;
  found.add(primary);
  for (const f of types.get(primary) ?? []) dependencies(types, FIELD_TYPE.exec(f.type)?.[1] ?? '', found);
  return found;
}

const typeText = (types: Map<string, TypedField[]>, t: string): string => `${t}(${(types.get(t) ?? []).map((f) => `${f.type} ${f.name}`).join(',')})`;

/** `Primary(type name,…)` followed by the types it references, sorted by name. */
export function encodeType(types: Map<string, TypedField[]>, primary: string): string {
  const deps = [...dependencies(types, primary)].filter((t) => t !== primary).sort();
  return [primary, ...deps].map((t) => typeText(types, t)).join('');
}

/** The length of encodeType's answer, known before the text is assembled. */
function encodedTypeLength(types: Map<string, TypedField[]>, primary: string): number {
  let n = 0;
  for (const t of dependencies(types, primary))
    n += t.length + 2 + (types.get(t) ?? []).reduce((sum, f, i) => sum + f.type.length + 1 + f.name.length + (i > 0 ? 1 : 0), 0);
  return n;
}

/**
 * Hashes one request's values: its count of values (LIMITS.typedData.values) is shared by the
 * domain and the message, and every hash goes through the meter, whose bound on the bytes hashed
 * also covers type encodings (a type naming every other type is hashed with all of them).
 */
class Encoder {
  private values = 0;
  private readonly typeHashes = new Map<string, Uint8Array>();

  constructor(
    private readonly types: Map<string, TypedField[]>,
    private readonly meter: Meter,
  ) {}

  hashStruct(typeName: string, fields: TypedField[], value: unknown, path: string, depth: number): Uint8Array {
    if (depth > MAX_DEPTH) refuse(path, `nests structs deeper than ${MAX_DEPTH}`);
    const o = object(
      value,
      path,
      fields.map((f) => f.name),
      fields.map((f) => f.name),
    );
    let typeHash = this.typeHashes.get(typeName);
    if (!typeHash) {
      // Counted from its length first: the text of a type naming every other one is not assembled past the bound.
      const domain = typeName === 'EIP712Domain';
      this.meter.hashing(domain ? 200 : encodedTypeLength(this.types, typeName), path);
      typeHash = keccak_256(
        new TextEncoder().encode(domain ? `EIP712Domain(${fields.map((f) => `${f.type} ${f.name}`).join(',')})` : encodeType(this.types, typeName)),
      );
      this.typeHashes.set(typeName, typeHash);
    }
    const parts = [typeHash, ...fields.map((f) => this.encodeValue(f.type, o[f.name], `${path}/${f.name}`, depth))];
    return this.meter.keccak(Buffer.concat(parts), path);
  }

  encodeValue(type: string, value: unknown, path: string, depth: number): Uint8Array {
    if (++this.values > MAX_VALUES) refuse(path, `is past ${MAX_VALUES} values in one request`);
    this.meter.spend(1);
    const array = /^(.*)\[([0-9]*)\]$/.exec(type);
    if (array) {
      const [, inner = '', size = ''] = array;
      if (!Array.isArray(value)) return refuse(path, `must be an array (${type})`);
      if (depth + 1 > MAX_DEPTH) refuse(path, `nests arrays and structs deeper than ${MAX_DEPTH}`);
      if (value.length > MAX_ARRAY) refuse(path, `has more than ${MAX_ARRAY} elements`);
      if (size !== '' && value.length !== Number(size)) refuse(path, `must have exactly ${size} elements`);
      return this.meter.keccak(Buffer.concat(value.map((v, i) => this.encodeValue(inner, v, `${path}/${i}`, depth + 1))), path);
    }
    const struct = this.types.get(type);
    if (struct) return this.hashStruct(type, struct, value, path, depth + 1);
    return encodeAtomic(type, value, path, this.meter);
  }
}

/** intN / uintN as it is hashed; an intN may be negative, as a number or as a string with a minus sign. */
function integer(type: string, value: unknown, path: string): bigint {
  const sized = /^(u?int)([0-9]+)$/.exec(type);
  const bits = BigInt(sized?.[2] ?? '256');
  if (sized?.[1] === 'uint') return quantity(value, path, (1n << bits) - 1n);
  const negative = (typeof value === 'string' && value.startsWith('-')) || (typeof value === 'number' && value < 0);
  const magnitude = negative ? quantity(typeof value === 'string' ? value.slice(1) : -value, path) : quantity(value, path);
  if (negative && magnitude === 0n) refuse(path, 'must not be negative zero');
  const n = negative ? -magnitude : magnitude;
  if (n < -(1n << (bits - 1n)) || n >= 1n << (bits - 1n)) refuse(path, `is out of range for int${bits}`);
  return n;
}

/** bytesN: exactly N bytes of hex. */
function fixedBytes(type: string, value: unknown, path: string): Uint8Array {
  const n = Number(type.slice(5));
  const b = hexBytes(value, path, n);
  if (b.length !== n) refuse(path, `must be exactly ${n} bytes`);
  return b;
}

const isFixedBytes = (type: string): boolean => /^bytes[0-9]+$/.test(type);

/** A `string` leaf's UTF-8, at most LIMITS.typedData.stringBytes (a string longer in UTF-16 units is longer in bytes too). */
function stringBytes(value: unknown, path: string): Uint8Array {
  if (typeof value !== 'string') return refuse(path, 'must be a string');
  const max = LIMITS.typedData.stringBytes;
  const bytes = value.length > max ? undefined : new TextEncoder().encode(value);
  if (!bytes || bytes.length > max) return refuse(path, `is over ${max} bytes`);
  return bytes;
}

function encodeAtomic(type: string, value: unknown, path: string, meter: Meter): Uint8Array {
  switch (type) {
    case 'string':
      return meter.keccak(stringBytes(value, path), path);
    case 'bytes':
      return meter.keccak(hexBytes(value, path, LIMITS.typedData.bytesBytes), path);
    case 'bool':
      if (typeof value !== 'boolean') return refuse(path, 'must be true or false');
      return word(value ? 1n : 0n);
    case 'address':
      return word(BigInt(lowerAddress(value, path)));
  }
  if (isFixedBytes(type)) {
    const out = new Uint8Array(32);
    out.set(fixedBytes(type, value, path));
    return out;
  }
  // intN: two's complement in 256 bits.
  return word(BigInt.asUintN(256, integer(type, value, path)));
}

/**
 * An atomic value as its hash reads it, whatever its spelling, for policy conditions: integers as
 * bigint (a number, a decimal, `0x` hex with any case and leading zeros, a minus sign on either),
 * addresses and bytes as lower-case hex, text as the UTF-8 hashed for it reads back. The readers
 * are the encoder's, so a spelling the hash accepts cannot read as something else here.
 */
export function atomicValue(type: string, value: unknown, path: string): bigint | string | boolean {
  switch (type) {
    case 'string':
      stringBytes(value, path);
      return signedText(value as string);
    case 'bytes':
      return hex(hexBytes(value, path, LIMITS.typedData.bytesBytes));
    case 'bool':
      if (typeof value !== 'boolean') return refuse(path, 'must be true or false');
      return value;
    case 'address':
      return lowerAddress(value, path);
  }
  return isFixedBytes(type) ? hex(fixedBytes(type, value, path)) : integer(type, value, path);
}

export function domainSeparator(td: TypedData, meter: Meter = new Meter()): Uint8Array {
  return new Encoder(td.types, meter).hashStruct('EIP712Domain', td.domainType, td.domain, '/params/typedData/domain', 0);
}

export function hashMessage(td: TypedData, meter: Meter = new Meter()): Uint8Array {
  return new Encoder(td.types, meter).hashStruct(td.primaryType, td.types.get(td.primaryType) ?? [], td.message, '/params/typedData/message', 0);
}

/** keccak-256(0x19 ‖ 0x01 ‖ domainSeparator ‖ hashStruct(message)), the domain and the message counted as one request. */
export function typedDataDigest(td: TypedData, meter: Meter = new Meter()): Uint8Array {
  const encoder = new Encoder(td.types, meter);
  const domain = encoder.hashStruct('EIP712Domain', td.domainType, td.domain, '/params/typedData/domain', 0);
  const message = encoder.hashStruct(td.primaryType, td.types.get(td.primaryType) ?? [], td.message, '/params/typedData/message', 0);
  return meter.keccak(Buffer.concat([Uint8Array.of(0x19, 0x01), domain, message]), '/params/typedData');
}

/** A domain field as its hash reads it (see atomicValue); undefined when the domain does not have it. */
export function domainValue(td: Pick<TypedData, 'domain'>, name: string): bigint | string | boolean | undefined {
  const field = DOMAIN_FIELDS.find((f) => f.name === name);
  const value = td.domain[name];
  return field && value !== undefined ? atomicValue(field.type, value, `/params/typedData/domain/${name}`) : undefined;
}

/** A leaf of the message by its path (`a.b.0`), with its declared type and its value as hashed; undefined when there is none. */
export function typedLeaf(
  td: Pick<TypedData, 'types' | 'primaryType' | 'message'>,
  path: readonly string[],
): { type: string; value: bigint | string | boolean } | undefined {
  let type = td.primaryType;
  let value: unknown = td.message;
  for (const segment of path) {
    const array = /^(.*)\[[0-9]*\]$/.exec(type);
    if (array) {
      if (!/^[0-9]+$/.test(segment) || !Array.isArray(value)) return undefined;
      value = (value as unknown[])[Number(segment)];
      type = array[1] ?? '';
    } else {
      const field = td.types.get(type)?.find((f) => f.name === segment);
      if (!field || typeof value !== 'object' || value === null) return undefined;
      value = (value as Json)[segment];
      type = field.type;
    }
    if (value === undefined) return undefined;
  }
  if (td.types.has(type) || /\]$/.test(type)) return undefined;
  return { type, value: atomicValue(type, value, `/params/typedData/message/${path.join('/')}`) };
}
