import { signDigest, rsv, word, type Signature } from './ecdsa.js';
import { authorizationDigest, parseAuthorization } from './authorization.js';
import { hex, object, quantityHex, refuse } from './input.js';
import { parsePersonalSign, personalDigest } from './message.js';
import { parseTransaction, serializeSigned, transactionDigest } from './transaction.js';
import { domainValue, parseTypedData, typedLeaf } from './typed-data.js';

export const METHODS = ['personal_sign', 'eth_signTypedData_v4', 'eth_signTransaction', 'eth_signAuthorization'] as const;
export type Method = (typeof METHODS)[number];

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
  /** A typed-data message's leaf by path, with its declared type and its value as hashed, for `message.<path>` conditions. */
  typedLeaf?: (path: readonly string[]) => { type: string; value: bigint | string | boolean } | undefined;
  answer(sig: Signature): Record<string, unknown>;
}

const selectorOf = (data: Uint8Array): string | undefined => (data.length >= 4 ? hex(data.subarray(0, 4)) : undefined);

/** `{ method, params }` → an operation, or a SignerError('invalid_operation') naming the field. */
export function parseOperation(body: unknown): Operation {
  const o = object(body, '', ['method', 'params'], ['method', 'params']);
  const method = o['method'];
  if (typeof method !== 'string' || !(METHODS as readonly string[]).includes(method)) return refuse('/method', `must be one of ${METHODS.join(', ')}`);
  switch (method as Method) {
    case 'personal_sign': {
      const m = parsePersonalSign(o['params']);
      return {
        method: 'personal_sign',
        digest: personalDigest(m.bytes),
        // Read from the bytes signed: `isHex` says they are not text, whichever way the request spelled them.
        fields: { length: m.bytes.length, isHex: m.text === undefined, message: m.text ?? UNREADABLE },
        answer: (sig) => ({ signature: rsv(sig) }),
      };
    }
    case 'eth_signTypedData_v4': {
      const td = parseTypedData(o['params']);
      return {
        method: 'eth_signTypedData_v4',
        digest: td.digest,
        fields: {
          primaryType: td.primaryType,
          'domain.name': domainValue(td, 'name'),
          'domain.version': domainValue(td, 'version'),
          'domain.chainId': domainValue(td, 'chainId'),
          'domain.verifyingContract': domainValue(td, 'verifyingContract'),
        },
        typedLeaf: (path) => typedLeaf(td, path),
        answer: (sig) => ({ signature: rsv(sig) }),
      };
    }
    case 'eth_signTransaction': {
      const tx = parseTransaction(o['params']);
      return {
        method: 'eth_signTransaction',
        digest: transactionDigest(tx),
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
        },
        ...(tx.from ? { from: tx.from } : {}),
        calldata: tx.data,
        answer: (sig) => {
          const { signedTransaction, hash } = serializeSigned(tx, sig);
          return { signedTransaction: hex(signedTransaction), hash: hex(hash) };
        },
      };
    }
    case 'eth_signAuthorization': {
      const a = parseAuthorization(o['params']);
      return {
        method: 'eth_signAuthorization',
        digest: authorizationDigest(a),
        fields: { chainId: a.chainId, address: a.address, nonce: a.nonce },
        answer: (sig) => ({
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

/** Signs a read operation with `secret` (the caller zeroes it): the method's answer and the digest signed. */
export function signOperation(op: Operation, secret: Uint8Array): { answer: Record<string, unknown>; digest: string } {
  return { answer: op.answer(signDigest(op.digest, secret)), digest: hex(op.digest) };
}
