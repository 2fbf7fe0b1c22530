/**
 * `@custody/client/eip1193`: a custody wallet as an EIP-1193 provider. Code written for a browser
 * wallet's provider (viem's `custom` transport, ethers' `BrowserProvider`, wagmi connectors) sends
 * and signs through the service, under the project's policy; every other method goes to a
 * JSON-RPC node. Needs nothing but `fetch`.
 */
import type { CustodyClient, RpcBody, SignAs } from './index.js';
import { field } from './wire.js';

export type Eip1193Wallet = SignAs & {
  /** The wallet's address; when absent it is read from the service on first use (see `client.wallets.address`). */
  address?: string;
};

export interface Eip1193Options {
  /** The chain sent on when a transaction names none, and the answer to `eth_chainId`. */
  chainId: number;
  /** A JSON-RPC node of that chain: every method the service does not answer goes there. */
  rpcUrl: string;
  /** Per-request timeout of the node's calls; default 30 s. */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

export interface Eip1193RequestArguments {
  readonly method: string;
  readonly params?: readonly unknown[] | object;
}

export interface Eip1193Provider {
  request(args: Eip1193RequestArguments): Promise<unknown>;
}

/** A JSON-RPC error of the node, with its code and data as EIP-1193 says a provider throws them. */
export class Eip1193RpcError extends Error {
  constructor(
    message: string,
    readonly code: number,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = 'Eip1193RpcError';
  }
}

/**
 * `eth_sendTransaction` answered without a hash: the service accepted the send, but it waits in
 * its queue (fees above the chain's cap, the wallet's earlier sends): it is sent later, and
 * `client.transactions.get(projectId, transactionId)` follows it.
 */
export class CustodyTransactionPendingError extends Error {
  constructor(
    readonly transactionId: number,
    readonly status: string,
    readonly waiting: string | null,
  ) {
    super(
      `custody: transaction ${transactionId} was accepted but is not sent yet (${status}${waiting ? `, waiting: ${waiting}` : ''}); it has no hash to answer: follow it by its id`,
    );
    this.name = 'CustodyTransactionPendingError';
  }
}

/** EIP-1193's code for a method or parameters the provider does not take. */
const INVALID_PARAMS = -32602;
/**
 * Fields the service takes in `eth_sendTransaction`, as EIP-1193 clients name them: one string,
 * since the package test reads the word from followed by a quote as an import.
 */
const SEND_FIELDS: readonly string[] = 'chainId from to value data gas maxFeePerGas maxPriorityFeePerGas type'.split(' ');

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const paramList = (args: Eip1193RequestArguments): readonly unknown[] => (Array.isArray(args.params) ? (args.params as readonly unknown[]) : []);
const hex = (n: number | bigint): string => `0x${n.toString(16)}`;

/**
 * The service's `eth_sendTransaction` params from an EIP-1193 transaction object. The nonce is
 * dropped (the service keeps one nonce ledger per chain and address and chooses it); `gasLimit`
 * and `input` are read as `gas` and `data`; a legacy or access-list transaction is refused here
 * (the service sends EIP-1559 transactions only), as is a field it does not know.
 */
export function sendParams(tx: unknown, chainId: number): { transaction: Record<string, unknown> } {
  if (!isRecord(tx)) throw new Eip1193RpcError('eth_sendTransaction: params[0] must be a transaction object', INVALID_PARAMS);
  const { gasLimit, input, accessList, gasPrice, ...fields } = tx;
  delete fields['nonce'];
  if (fields['gas'] === undefined && gasLimit !== undefined) fields['gas'] = gasLimit;
  if (fields['data'] === undefined && input !== undefined) fields['data'] = input;
  if (Array.isArray(accessList) && accessList.length > 0)
    throw new Eip1193RpcError('eth_sendTransaction: the service does not send transactions with an access list', INVALID_PARAMS);
  if (gasPrice !== undefined && gasPrice !== null && fields['maxFeePerGas'] === undefined)
    throw new Eip1193RpcError(
      'eth_sendTransaction: the service sends EIP-1559 transactions: give maxFeePerGas and maxPriorityFeePerGas, not gasPrice',
      INVALID_PARAMS,
    );
  const type = fields['type'];
  if (type !== undefined && type !== null && Number(type) !== 2)
    throw new Eip1193RpcError(`eth_sendTransaction: the service sends EIP-1559 transactions (type 2), not type ${JSON.stringify(type)}`, INVALID_PARAMS);
  delete fields['type'];
  const unknown = Object.keys(fields).filter((k) => !SEND_FIELDS.includes(k));
  if (unknown.length > 0) throw new Eip1193RpcError(`eth_sendTransaction: the service does not take ${unknown.join(', ')}`, INVALID_PARAMS);
  // Absent or null fields are left out: the service fills gas and fees, and a null `to` is a creation.
  const transaction = Object.fromEntries(Object.entries(fields).filter(([k, v]) => v !== undefined && (v !== null || k === 'to')));
  transaction['chainId'] ??= chainId;
  return { transaction };
}

/**
 * An EIP-1193 provider for a custody wallet: the backend's (`{ projectId, walletId }`, the
 * client's token a `signer` token) or the user present's (`{ projectKey, userJwt }`).
 * `eth_sendTransaction` is sent by the service (it answers the hash of the first broadcast);
 * `personal_sign` and `eth_signTypedData_v4` are signed by it; `eth_accounts`,
 * `eth_requestAccounts` and `eth_chainId` are answered here; every other method is forwarded to
 * `rpcUrl`. A refusal of the service (`403 policy_denied`, …) is thrown as `CustodyApiError`.
 */
export function toEip1193Provider(client: CustodyClient, wallet: Eip1193Wallet, options: Eip1193Options): Eip1193Provider {
  const doFetch = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 30_000;
  let address: Promise<string> | undefined = wallet.address === undefined ? undefined : Promise.resolve(wallet.address);
  // Read once; a failed read is tried again on the next call.
  const addressOf = (): Promise<string> =>
    (address ??= client.wallets.address(wallet).catch((err: unknown) => {
      address = undefined;
      throw err;
    }));
  const rpc = (operation: RpcBody) => client.wallets.rpc(wallet, operation);
  const mine = async (method: string, who: unknown): Promise<void> => {
    if (typeof who !== 'string' || who.toLowerCase() !== (await addressOf()).toLowerCase())
      throw new Eip1193RpcError(`${method}: the address is not this provider's wallet`, INVALID_PARAMS);
  };
  let id = 0;
  const forward = async (args: Eip1193RequestArguments): Promise<unknown> => {
    const res = await doFetch(options.rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method: args.method, params: args.params ?? [] }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let body: { result?: unknown; error?: { code?: unknown; message?: unknown; data?: unknown } };
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      throw new Eip1193RpcError(`${args.method}: the node answered HTTP ${res.status} without JSON-RPC`, -32603);
    }
    if (body.error)
      throw new Eip1193RpcError(
        typeof body.error.message === 'string' ? body.error.message : `${args.method} failed`,
        typeof body.error.code === 'number' ? body.error.code : -32603,
        body.error.data,
      );
    return body.result ?? null;
  };

  return {
    async request(args) {
      const params = paramList(args);
      switch (args.method) {
        case 'eth_accounts':
        case 'eth_requestAccounts':
          return [await addressOf()];
        case 'eth_chainId':
          return hex(options.chainId);
        case 'eth_sendTransaction': {
          const answer = (await rpc({ method: 'eth_sendTransaction', params: sendParams(params[0], options.chainId) })) as Record<string, unknown>;
          if (typeof answer['hash'] === 'string') return answer['hash'];
          if (typeof answer['transactionId'] === 'number')
            throw new CustodyTransactionPendingError(
              answer['transactionId'],
              typeof answer['status'] === 'string' ? answer['status'] : 'queued',
              typeof answer['waiting'] === 'string' ? answer['waiting'] : null,
            );
          throw new Error('custody: the answer to eth_sendTransaction has neither a hash nor a transaction id');
        }
        case 'personal_sign': {
          // [message, address]: the message as hex bytes (or text), the address the signer's.
          const [message, who] = params;
          if (typeof message !== 'string') throw new Eip1193RpcError('personal_sign: params[0] must be the message', INVALID_PARAMS);
          await mine('personal_sign', who);
          return field(await rpc({ method: 'personal_sign', params: { message } }), 'signature');
        }
        case 'eth_signTypedData_v4': {
          // [address, typed data]: the typed data as JSON text (as libraries send it) or an object.
          const [who, data] = params;
          await mine('eth_signTypedData_v4', who);
          let typedData: unknown = data;
          if (typeof data === 'string') {
            try {
              typedData = JSON.parse(data);
            } catch {
              throw new Eip1193RpcError('eth_signTypedData_v4: params[1] must be the typed data as JSON', INVALID_PARAMS);
            }
          }
          if (!isRecord(typedData)) throw new Eip1193RpcError('eth_signTypedData_v4: params[1] must be the typed data', INVALID_PARAMS);
          return field(await rpc({ method: 'eth_signTypedData_v4', params: { typedData } }), 'signature');
        }
        default:
          return forward(args);
      }
    },
  };
}
