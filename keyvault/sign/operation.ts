import { isSigningMethod, SIGNING_METHODS, type SigningMethod } from '../../contract/index.js';
import { signDigest, rsv, word, type Signature } from './ecdsa.js';
import { authorizationDigest, parseAuthorization, type Authorization } from './authorization.js';
import { hex, object, quantityHex, refuse, type Json } from './input.js';
import { parsePersonalSign, personalDigest } from './message.js';
import { Meter } from './meter.js';
import { maxCost, parseTransactionRequest, serializeSigned, transactionDigest, type Transaction, type TransactionIntent } from './transaction.js';
import { domainValue, parseTypedData, typedLeaf, type TypedField } from './typed-data.js';

/** A method of the contract's list: each has its reading below (the switches are exhaustive). */
export type Method = SigningMethod;

/**
 * A field the operation has but that cannot be read as its kind (message bytes that are not UTF-8
 * text): a condition on it cannot be judged, so a deny rule naming it denies (fail closed).
 */
export const UNREADABLE: unique symbol = Symbol('unreadable');

/**
 * What a policy condition may read: the catalogue's fields of the method, each as the digest
 * covers it whatever the request's spelling; undefined when the operation has no such field.
 */
export type PolicyFields = Record<string, string | number | boolean | bigint | typeof UNREADABLE | undefined>;

/**
 * An operation the signer has read and hashed: the digest it will sign, the fields its policy
 * sees, and how a signature becomes the method's answer. There is no way to ask for a digest's
 * signature without one of these: the signer signs nothing it did not hash itself.
 */
export interface Operation {
  method: Method;
  digest: Uint8Array;
  fields: PolicyFields;
  /** The sender the caller named, when it did: it must be the signing wallet. */
  from?: string;
  /** A transaction's calldata, for conditions on a call's arguments. */
  calldata?: Uint8Array;
  /** A transaction: what the nonce guard checks (keyvault/sign/nonce-guard.ts) and what a no-op must be. */
  transaction?: { tx: Transaction; intent: TransactionIntent };
  /** A typed-data message's leaf by path, with its declared type and its value as hashed, for `message.<path>` conditions. */
  typedLeaf?: (path: readonly string[]) => { type: string; value: bigint | string | boolean } | undefined;
  answer(sig: Signature): Promise<Record<string, unknown>>;
}

/**
 * What reading an operation found, as plain data a worker thread can hand to the main thread
 * (structured clone: no functions, no symbols); `operationOf` makes the Operation of it. A typed
 * message travels as its own serialisation, read on the main thread only if a rule asks for one of
 * its leaves.
 */
export type OperationData =
  | { method: 'personal_sign'; digest: Uint8Array; length: number; text: string | undefined }
  | {
      method: 'eth_signTypedData_v4';
      digest: Uint8Array;
      primaryType: string;
      domain: Record<'name' | 'version' | 'chainId' | 'verifyingContract', bigint | string | boolean | undefined>;
      types: Array<[string, TypedField[]]>;
    }
  | { method: 'eth_signTransaction' | 'eth_sendTransaction'; digest: Uint8Array; tx: Transaction; intent: TransactionIntent }
  | { method: 'eth_signAuthorization'; digest: Uint8Array; authorization: Authorization };

/** How a read operation's typed message is had again, and how a signed transaction is assembled. */
export interface Finish {
  message?: () => Json;
  serialize?: (tx: Transaction, sig: Signature) => Promise<{ signedTransaction: Uint8Array; hash: Uint8Array }>;
}

const selectorOf = (data: Uint8Array): string | undefined => (data.length >= 4 ? hex(data.subarray(0, 4)) : undefined);

/**
 * `{ method, params }` read and hashed, its work counted on `meter` (the main thread's stops at its
 * budget: Meter), or a SignerError('invalid_operation') naming the field. The typed message, when
 * there is one, is returned beside the data.
 */
export function readOperation(body: unknown, meter: Meter): { data: OperationData; message?: Json } {
  const o = object(body, '', ['method', 'params'], ['method', 'params']);
  const method = o['method'];
  if (!isSigningMethod(method)) return refuse('/method', `must be one of ${SIGNING_METHODS.join(', ')}`);
  switch (method) {
    case 'personal_sign': {
      const m = parsePersonalSign(o['params']);
      return { data: { method: 'personal_sign', digest: personalDigest(m.bytes, meter), length: m.bytes.length, text: m.text } };
    }
    case 'eth_signTypedData_v4': {
      const td = parseTypedData(o['params'], meter);
      const domain = {
        name: domainValue(td, 'name'),
        version: domainValue(td, 'version'),
        chainId: domainValue(td, 'chainId'),
        verifyingContract: domainValue(td, 'verifyingContract'),
      };
      return {
        data: { method: 'eth_signTypedData_v4', digest: td.digest, primaryType: td.primaryType, domain, types: [...td.types] },
        message: td.message,
      };
    }
    case 'eth_signTransaction':
    case 'eth_sendTransaction': {
      const { tx, intent } = parseTransactionRequest(o['params'], method === 'eth_sendTransaction', meter);
      return { data: { method, digest: transactionDigest(tx, meter), tx, intent } };
    }
    case 'eth_signAuthorization': {
      const a = parseAuthorization(o['params']);
      return { data: { method: 'eth_signAuthorization', digest: authorizationDigest(a), authorization: a } };
    }
  }
}

/** The Operation of read data: the fields its policy sees, its leaves, its answer. */
export function operationOf(data: OperationData, finish: Finish = {}): Operation {
  switch (data.method) {
    case 'personal_sign':
      return {
        method: 'personal_sign',
        digest: data.digest,
        // Read from the bytes signed: `isHex` says they are not text, whichever way the request spelled them.
        fields: { length: data.length, isHex: data.text === undefined, message: data.text ?? UNREADABLE },
        answer: (sig) => Promise.resolve({ signature: rsv(sig) }),
      };
    case 'eth_signTypedData_v4': {
      const types = new Map(data.types);
      const message = finish.message;
      // Leaves are read once per path whatever the number of rules naming them.
      const leaves = new Map<string, ReturnType<typeof typedLeaf>>();
      return {
        method: 'eth_signTypedData_v4',
        digest: data.digest,
        fields: {
          primaryType: data.primaryType,
          'domain.name': data.domain.name,
          'domain.version': data.domain.version,
          'domain.chainId': data.domain.chainId,
          'domain.verifyingContract': data.domain.verifyingContract,
        },
        typedLeaf: (path) => {
          const key = path.join('.');
          if (!leaves.has(key)) {
            if (!message) throw new Error('a typed operation without its message');
            leaves.set(key, typedLeaf({ types, primaryType: data.primaryType, message: message() }, path));
          }
          return leaves.get(key);
        },
        answer: (sig) => Promise.resolve({ signature: rsv(sig) }),
      };
    }
    case 'eth_signTransaction':
    case 'eth_sendTransaction': {
      const { tx, intent } = data;
      return {
        method: data.method,
        digest: data.digest,
        fields: {
          type: tx.type,
          chainId: tx.chainId,
          nonce: tx.nonce,
          to: tx.to,
          value: tx.value,
          gas: tx.gas,
          gasPrice: tx.gasPrice,
          maxFeePerGas: tx.maxFeePerGas,
          maxPriorityFeePerGas: tx.maxPriorityFeePerGas,
          'data.length': tx.data.length,
          'data.selector': selectorOf(tx.data),
          maxCost: maxCost(tx),
          ...(data.method === 'eth_sendTransaction' ? { purpose: intent.purpose } : {}),
        },
        ...(tx.from ? { from: tx.from } : {}),
        calldata: tx.data,
        transaction: { tx, intent },
        answer: async (sig) => {
          const { signedTransaction, hash } = finish.serialize ? await finish.serialize(tx, sig) : serializeSigned(tx, sig);
          return { signedTransaction: hex(signedTransaction), hash: hex(hash) };
        },
      };
    }
    case 'eth_signAuthorization': {
      const a = data.authorization;
      return {
        method: 'eth_signAuthorization',
        digest: data.digest,
        fields: { chainId: a.chainId, address: a.address, nonce: a.nonce },
        answer: (sig) =>
          Promise.resolve({
            authorization: {
              chainId: quantityHex(a.chainId),
              address: a.address,
              nonce: quantityHex(a.nonce),
              yParity: quantityHex(BigInt(sig.yParity)),
              r: hex(word(sig.r)),
              s: hex(word(sig.s)),
            },
          }),
      };
    }
  }
}

/** `{ method, params }` → an operation, read on this thread without a budget (tests, tools), or a SignerError('invalid_operation') naming the field. */
export function parseOperation(body: unknown, meter: Meter = new Meter()): Operation {
  const { data, message } = readOperation(body, meter);
  return operationOf(data, message ? { message: () => message } : {});
}

/**
 * Signs a read operation with `secret` (the caller zeroes it once this returns: the answer is
 * assembled from the signature alone): the method's answer and the digest signed.
 */
export function signOperation(op: Operation, secret: Uint8Array): { answer: Promise<Record<string, unknown>>; digest: string } {
  return { answer: op.answer(signDigest(op.digest, secret)), digest: hex(op.digest) };
}
