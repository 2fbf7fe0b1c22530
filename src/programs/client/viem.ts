/**
 * `@custody/client/viem`: a custody wallet as a viem account. Code written for a viem
 * `LocalAccount` (a wallet client's `account`, `signMessage`, `signTypedData`, `signTransaction`,
 * `signAuthorization`) signs through the service, under the project's policy, unchanged.
 */
import { getTransactionType, hexToNumber, type Hex, type LocalAccount, type TransactionSerializable } from 'viem';
import { toAccount } from 'viem/accounts';
import type { CustodyClient, RpcBody, SignAs } from './index.js';
import { field, messageParam, toWire } from './wire.js';

export type ViemWallet = SignAs & {
  /** The wallet's address; when absent it is read from the service (see `client.wallets.address`). */
  address?: `0x${string}`;
};

const TYPES = { legacy: 0, eip2930: 1, eip1559: 2 } as const;

/**
 * A viem custom account (`toAccount`) whose every signature is made by the service: the backend's
 * (`{ projectId, walletId }`, the client's token a `signer` token) or the user present's
 * (`{ projectKey, userJwt }`). Transactions of types 0, 1 and 2 are signed (a chain's own
 * serializer is not used: the service writes standard transactions); other types are refused here.
 * A refusal of the service (`403 policy_denied`, …) is thrown as `CustodyApiError`.
 */
export async function toViemAccount(client: CustodyClient, wallet: ViemWallet): Promise<LocalAccount<'custody'>> {
  const address = wallet.address ?? ((await client.wallets.address(wallet)) as `0x${string}`);
  const rpc = (method: RpcBody['method'], params: Record<string, unknown>) => client.wallets.rpc(wallet, { method, params });
  const account = toAccount({
    address,
    async signMessage({ message }) {
      const param = typeof message === 'string' ? messageParam(message) : typeof message.raw === 'string' ? message.raw : messageParam(message.raw);
      return field(await rpc('personal_sign', { message: param }), 'signature');
    },
    async signTypedData(typedData) {
      const { domain, types, primaryType, message } = typedData as { domain?: unknown; types: unknown; primaryType: string; message?: unknown };
      return field(await rpc('eth_signTypedData_v4', { typedData: toWire({ domain: domain ?? {}, types, primaryType, message: message ?? {} }) }), 'signature');
    },
    async signTransaction(transaction) {
      const tx = transaction as TransactionSerializable;
      const kind = getTransactionType(tx) as string;
      if (!(kind in TYPES)) throw new Error(`custody: transactions of type ${kind} are not signed by the service (types 0, 1 and 2 are)`);
      const params = {
        type: TYPES[kind as keyof typeof TYPES],
        chainId: tx.chainId,
        nonce: tx.nonce,
        gas: tx.gas,
        gasPrice: tx.gasPrice,
        maxFeePerGas: tx.maxFeePerGas,
        maxPriorityFeePerGas: tx.maxPriorityFeePerGas,
        to: tx.to ?? undefined,
        value: tx.value,
        data: tx.data,
        accessList: tx.accessList,
      };
      return field(await rpc('eth_signTransaction', { transaction: toWire(params) }), 'signedTransaction');
    },
    async signAuthorization(request) {
      const contract = request.address ?? request.contractAddress;
      const answer = await rpc('eth_signAuthorization', { chainId: request.chainId, address: contract, nonce: request.nonce });
      const auth = (answer as { authorization?: Record<string, Hex> }).authorization;
      if (!auth) throw new Error('custody: the signing answer has no authorization');
      return {
        address: contract,
        chainId: hexToNumber(field(auth, 'chainId')),
        nonce: hexToNumber(field(auth, 'nonce')),
        yParity: hexToNumber(field(auth, 'yParity')),
        r: field(auth, 'r'),
        s: field(auth, 's'),
      };
    },
  });
  return { ...account, source: 'custody' };
}
