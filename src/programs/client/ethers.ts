/**
 * `@custody/client/ethers`: a custody wallet as an ethers v6 `Signer`. Code written for an ethers
 * signer (`signMessage`, `signTypedData`, `signTransaction`, `sendTransaction` with a provider,
 * `authorize`, contracts connected to it) signs through the service, under the project's policy.
 */
import {
  AbstractSigner,
  Signature,
  Transaction,
  TypedDataEncoder,
  copyRequest,
  getAddress,
  resolveAddress,
  type Authorization,
  type AuthorizationRequest,
  type Provider,
  type TransactionRequest,
  type TypedDataDomain,
  type TypedDataField,
} from 'ethers';
import type { CustodyClient, RpcBody, SignAs } from './index.js';
import { field, messageParam, toWire } from './wire.js';

export type EthersWallet = SignAs & {
  /** The wallet's address; when absent it is read from the service (see `client.wallets.address`). */
  address?: string;
};

/**
 * An ethers `AbstractSigner` whose every signature is made by the service: the backend's
 * (`{ projectId, walletId }`, the client's token a `signer` token) or the user present's
 * (`{ projectKey, userJwt }`). Transactions of types 0, 1 and 2 are signed; other types are refused
 * here. A refusal of the service (`403 policy_denied`, …) is thrown as `CustodyApiError`.
 */
export class CustodySigner extends AbstractSigner {
  readonly address: string;
  readonly #client: CustodyClient;
  readonly #wallet: SignAs;

  constructor(client: CustodyClient, wallet: SignAs & { address: string }, provider: Provider | null = null) {
    super(provider);
    this.#client = client;
    this.#wallet = wallet;
    this.address = getAddress(wallet.address);
  }

  /** A signer for `wallet`, its address read from the service when not given. */
  static async create(client: CustodyClient, wallet: EthersWallet, provider: Provider | null = null): Promise<CustodySigner> {
    const address = wallet.address ?? (await client.wallets.address(wallet));
    return new CustodySigner(client, { ...wallet, address }, provider);
  }

  getAddress(): Promise<string> {
    return Promise.resolve(this.address);
  }

  connect(provider: Provider | null): CustodySigner {
    return new CustodySigner(this.#client, { ...this.#wallet, address: this.address }, provider);
  }

  #rpc(method: RpcBody['method'], params: Record<string, unknown>) {
    return this.#client.wallets.rpc(this.#wallet, { method, params });
  }

  async signMessage(message: string | Uint8Array): Promise<string> {
    return field(await this.#rpc('personal_sign', { message: messageParam(message) }), 'signature');
  }

  async signTypedData(domain: TypedDataDomain, types: Record<string, TypedDataField[]>, value: Record<string, unknown>): Promise<string> {
    const structs = Object.fromEntries(Object.entries(types).filter(([name]) => name !== 'EIP712Domain'));
    // ENS names in the domain or the message are resolved first, as ethers' own wallet does.
    const populated = await TypedDataEncoder.resolveNames(domain, structs, value, async (name) => {
      const address = await this.provider?.resolveName(name);
      if (address === undefined || address === null) throw new Error(`custody: cannot resolve the name ${name} without a provider that knows it`);
      return address;
    });
    const typedData = {
      domain: populated.domain,
      types: structs,
      primaryType: TypedDataEncoder.getPrimaryType(structs),
      message: populated.value as Record<string, unknown>,
    };
    return field(await this.#rpc('eth_signTypedData_v4', { typedData: toWire(typedData) }), 'signature');
  }

  async signTransaction(request: TransactionRequest): Promise<string> {
    const { to, from, ...rest } = copyRequest(request);
    if (from !== undefined && from !== null && getAddress(await resolveAddress(from, this.provider)) !== this.address) {
      throw new Error('custody: transaction from address mismatch');
    }
    const btx = Transaction.from({ ...rest, to: to === undefined || to === null ? null : await resolveAddress(to, this.provider) });
    const type = btx.inferType();
    if (type !== 0 && type !== 1 && type !== 2) throw new Error(`custody: transactions of type ${type} are not signed by the service (types 0, 1 and 2 are)`);
    const transaction = {
      type,
      chainId: btx.chainId,
      nonce: btx.nonce,
      gas: btx.gasLimit,
      gasPrice: type === 2 ? undefined : (btx.gasPrice ?? undefined),
      maxFeePerGas: type === 2 ? (btx.maxFeePerGas ?? undefined) : undefined,
      maxPriorityFeePerGas: type === 2 ? (btx.maxPriorityFeePerGas ?? undefined) : undefined,
      to: btx.to ?? undefined,
      value: btx.value,
      data: btx.data,
      accessList: type === 0 ? undefined : (btx.accessList ?? undefined),
    };
    return field(await this.#rpc('eth_signTransaction', { transaction: toWire(transaction) }), 'signedTransaction');
  }

  /** An EIP-7702 authorization; a missing nonce or chain id is filled from the provider, as ethers does. */
  override async authorize(request: AuthorizationRequest): Promise<Authorization> {
    const populated = await this.populateAuthorization({ ...request, address: await resolveAddress(request.address, this.provider) });
    const address = getAddress(await resolveAddress(populated.address, this.provider));
    const answer = await this.#rpc('eth_signAuthorization', {
      chainId: BigInt(populated.chainId ?? 0).toString(),
      address,
      nonce: BigInt(populated.nonce ?? 0).toString(),
    });
    const auth = (answer as { authorization?: Record<string, string> }).authorization;
    if (!auth) throw new Error('custody: the signing answer has no authorization');
    const signature = Signature.from({ r: field(auth, 'r'), s: field(auth, 's'), yParity: Number(BigInt(field(auth, 'yParity'))) as 0 | 1 });
    return { address, chainId: BigInt(field(auth, 'chainId')), nonce: BigInt(field(auth, 'nonce')), signature };
  }
}
