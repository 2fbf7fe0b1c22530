import { keccak_256 } from '@noble/hashes/sha3.js';
import { SEND_PURPOSES, type SendPurpose } from '../../contract/index.js';
import { LIMITS } from '../limits.js';
import type { Signature } from './ecdsa.js';
import { address, hexBytes, lowerAddress, object, quantity, refuse, UINT256_MAX, UINT64_MAX } from './input.js';
import type { Meter } from './meter.js';
import { integerBytes, rlpEncode, type RlpItem } from './rlp.js';

const { dataBytes: DATA_MAX_BYTES, accessListAddresses: ADDRESSES_MAX, storageKeys: KEYS_MAX } = LIMITS.transaction;

export interface AccessListEntry {
  address: string;
  storageKeys: Uint8Array[];
}

/** A transaction as signed: type 0 (legacy, always with EIP-155), 1 (EIP-2930) or 2 (EIP-1559). */
export interface Transaction {
  type: 0 | 1 | 2;
  chainId: bigint;
  nonce: bigint;
  gas: bigint;
  /** Types 0 and 1. */
  gasPrice?: bigint;
  /** Type 2. */
  maxFeePerGas?: bigint;
  maxPriorityFeePerGas?: bigint;
  /** Absent: contract creation. EIP-55. */
  to?: string;
  value: bigint;
  data: Uint8Array;
  accessList: AccessListEntry[];
  /** When the caller named the sender, it must be the signing wallet. */
  from?: string;
}

const FIELDS: Record<0 | 1 | 2, string[]> = {
  0: ['type', 'chainId', 'nonce', 'gas', 'gasPrice', 'to', 'value', 'data', 'from'],
  1: ['type', 'chainId', 'nonce', 'gas', 'gasPrice', 'to', 'value', 'data', 'accessList', 'from'],
  2: ['type', 'chainId', 'nonce', 'gas', 'maxFeePerGas', 'maxPriorityFeePerGas', 'to', 'value', 'data', 'accessList', 'from'],
};
const ANY_FIELD = [...new Set([...FIELDS[0], ...FIELDS[1], ...FIELDS[2]])];
const REQUIRED: Record<0 | 1 | 2, string[]> = {
  0: ['chainId', 'nonce', 'gas', 'gasPrice'],
  1: ['chainId', 'nonce', 'gas', 'gasPrice'],
  2: ['chainId', 'nonce', 'gas', 'maxFeePerGas', 'maxPriorityFeePerGas'],
};

/** The access list, its sizes checked before its entries are read: at most ADDRESSES_MAX entries and KEYS_MAX keys in all. */
function accessList(v: unknown, path: string, meter: Meter | undefined): AccessListEntry[] {
  if (!Array.isArray(v)) return refuse(path, 'must be an array of { address, storageKeys }');
  if (v.length > ADDRESSES_MAX) refuse(path, `has more than ${ADDRESSES_MAX} entries`);
  let keysSeen = 0;
  return v.map((e, i) => {
    const o = object(e, `${path}/${i}`, ['address', 'storageKeys'], ['address', 'storageKeys']);
    const keys = o['storageKeys'];
    if (!Array.isArray(keys)) return refuse(`${path}/${i}/storageKeys`, 'must be an array of 32-byte hex keys');
    keysSeen += keys.length;
    if (keysSeen > KEYS_MAX) refuse(`${path}/${i}/storageKeys`, `takes the access list past ${KEYS_MAX} storage keys`);
    meter?.spend(1 + keys.length);
    return {
      address: lowerAddress(o['address'], `${path}/${i}/address`),
      storageKeys: keys.map((k, j) => {
        const b = hexBytes(k, `${path}/${i}/storageKeys/${j}`, 32);
        if (b.length !== 32) refuse(`${path}/${i}/storageKeys/${j}`, 'must be 32 bytes');
        return b;
      }),
    };
  });
}

/**
 * What the request says of the transaction beside its fields: the hash of the transaction at the
 * same nonce it replaces (the nonce guard's only way past an earlier signature), and, for a send,
 * why it is signed.
 */
export interface TransactionIntent {
  replaces?: string;
  purpose?: SendPurpose;
}

const HASH_BYTES = 32;

/**
 * `{ transaction, replaces? }` (`eth_signTransaction`) or `{ transaction, purpose, replaces? }`
 * (`eth_sendTransaction`): the transaction and what the request says of it.
 */
export function parseTransactionRequest(params: unknown, send: boolean, meter?: Meter): { tx: Transaction; intent: TransactionIntent } {
  const p = object(
    params,
    '/params',
    send ? ['transaction', 'replaces', 'purpose'] : ['transaction', 'replaces'],
    send ? ['transaction', 'purpose'] : ['transaction'],
  );
  const intent: TransactionIntent = {};
  if (p['replaces'] !== undefined) {
    const r = hexBytes(p['replaces'], '/params/replaces', HASH_BYTES);
    if (r.length !== HASH_BYTES) refuse('/params/replaces', 'must be the 32-byte hash of the transaction replaced');
    intent.replaces = `0x${Buffer.from(r).toString('hex')}`;
  }
  if (send) {
    const purpose = p['purpose'];
    if (!SEND_PURPOSES.some((k) => k === purpose)) refuse('/params/purpose', `must be one of ${SEND_PURPOSES.join(', ')}`);
    intent.purpose = purpose as SendPurpose;
    if ((intent.purpose === 'speedUp' || intent.purpose === 'cancel') && intent.replaces === undefined)
      refuse('/params/replaces', `is required for a ${intent.purpose}: the hash of the transaction it replaces`);
  }
  return { tx: parseTransaction({ transaction: p['transaction'] }, meter), intent };
}

/**
 * gas × (maxFeePerGas or gasPrice) + value: the most a transaction can take from its sender, cut
 * at 2^256 − 1 (what a policy can name: "at least that much").
 */
export const maxCost = (tx: Transaction): bigint => {
  const cost = tx.gas * (tx.maxFeePerGas ?? tx.gasPrice ?? 0n) + tx.value;
  return cost > UINT256_MAX ? UINT256_MAX : cost;
};

/** `{ transaction }`: type 2 unless `type` says 0 or 1; `chainId` ≥ 1, the nonce, gas and fees required. */
export function parseTransaction(params: unknown, meter?: Meter): Transaction {
  const p = object(params, '/params', ['transaction'], ['transaction']);
  const raw = p['transaction'];
  const path = '/params/transaction';
  const typeField = object(raw, path, ANY_FIELD)['type'];
  const type = typeField === undefined ? 2n : quantity(typeField, `${path}/type`, 255n);
  if (type !== 0n && type !== 1n && type !== 2n) return refuse(`${path}/type`, 'must be 0 (legacy with EIP-155), 1 (EIP-2930) or 2 (EIP-1559)');
  const t = Number(type) as 0 | 1 | 2;
  const o = object(raw, path, FIELDS[t], REQUIRED[t]);
  const chainId = quantity(o['chainId'], `${path}/chainId`, UINT64_MAX);
  if (chainId === 0n) refuse(`${path}/chainId`, 'must be at least 1 (a transaction is signed for one chain)');
  const tx: Transaction = {
    type: t,
    chainId,
    nonce: quantity(o['nonce'], `${path}/nonce`, UINT64_MAX),
    gas: quantity(o['gas'], `${path}/gas`, UINT64_MAX),
    value: o['value'] === undefined ? 0n : quantity(o['value'], `${path}/value`, UINT256_MAX),
    data: o['data'] === undefined ? new Uint8Array(0) : hexBytes(o['data'], `${path}/data`, DATA_MAX_BYTES),
    accessList: o['accessList'] === undefined ? [] : accessList(o['accessList'], `${path}/accessList`, meter),
  };
  if (o['to'] !== undefined && o['to'] !== null) tx.to = address(o['to'], `${path}/to`);
  if (o['from'] !== undefined) tx.from = address(o['from'], `${path}/from`);
  if (t === 2) {
    tx.maxFeePerGas = quantity(o['maxFeePerGas'], `${path}/maxFeePerGas`);
    tx.maxPriorityFeePerGas = quantity(o['maxPriorityFeePerGas'], `${path}/maxPriorityFeePerGas`);
    if (tx.maxPriorityFeePerGas > tx.maxFeePerGas) refuse(`${path}/maxPriorityFeePerGas`, 'must not exceed maxFeePerGas');
  } else {
    tx.gasPrice = quantity(o['gasPrice'], `${path}/gasPrice`);
  }
  return tx;
}

const int = integerBytes;
const addr = (a: string | undefined): Uint8Array => (a === undefined ? new Uint8Array(0) : Uint8Array.from(Buffer.from(a.slice(2), 'hex')));
const accessItems = (list: AccessListEntry[]): RlpItem => list.map((e) => [addr(e.address), e.storageKeys]);

/** The fields each type lists before its signature, in the order of its EIP. */
function body(tx: Transaction): RlpItem[] {
  const common = [int(tx.gas), addr(tx.to), int(tx.value), tx.data];
  if (tx.type === 0) return [int(tx.nonce), int(tx.gasPrice ?? 0n), ...common];
  if (tx.type === 1) return [int(tx.chainId), int(tx.nonce), int(tx.gasPrice ?? 0n), ...common, accessItems(tx.accessList)];
  return [int(tx.chainId), int(tx.nonce), int(tx.maxPriorityFeePerGas ?? 0n), int(tx.maxFeePerGas ?? 0n), ...common, accessItems(tx.accessList)];
}

const typed = (type: number, payload: Uint8Array): Uint8Array => Buffer.concat([Uint8Array.of(type), payload]);

/** What is signed: EIP-155's nine fields for type 0, the type byte and the RLP list for 1 and 2. */
export function transactionDigest(tx: Transaction, meter?: Meter): Uint8Array {
  const hash = (b: Uint8Array) => (meter ? meter.keccak(b, '/params/transaction') : keccak_256(b));
  if (tx.type === 0) return hash(rlpEncode([...body(tx), int(tx.chainId), int(0n), int(0n)]));
  return hash(typed(tx.type, rlpEncode(body(tx))));
}

/** The signed transaction as broadcast, and its hash. */
export function serializeSigned(tx: Transaction, sig: Signature): { signedTransaction: Uint8Array; hash: Uint8Array } {
  const rs = [int(sig.r), int(sig.s)];
  const signedTransaction =
    tx.type === 0
      ? rlpEncode([...body(tx), int(tx.chainId * 2n + 35n + BigInt(sig.yParity)), ...rs])
      : typed(tx.type, rlpEncode([...body(tx), int(BigInt(sig.yParity)), ...rs]));
  return { signedTransaction, hash: keccak_256(signedTransaction) };
}
