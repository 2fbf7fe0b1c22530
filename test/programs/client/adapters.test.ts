import { expect } from 'chai';
import { Transaction, TypedDataEncoder, verifyAuthorization, verifyMessage, verifyTypedData, type TypedDataField } from 'ethers';
import {
  createWalletClient,
  custom,
  defineChain,
  recoverMessageAddress,
  recoverTransactionAddress,
  verifyTypedData as viemVerifyTypedData,
  type TransactionSerialized,
} from 'viem';
import { recoverAuthorizationAddress } from 'viem/utils';
import { CustodyApiError, CustodyClient } from '../../../src/programs/client/index.js';
import { CustodySigner } from '../../../src/programs/client/ethers.js';
import { toViemAccount } from '../../../src/programs/client/viem.js';
import { startAppWithIdp } from '../../support/app.js';

const AUDIENCE = 'urn:custody:testnet';
const CHAIN_ID = 8453;
const TO: `0x${string}` = '0x0000000000000000000000000000000000000B0b';

/** Every method allowed for both callers, but nine-byte messages ('forbidden'), which a deny rule names. */
const POLICY = {
  rules: [
    ...(['personal_sign', 'eth_signTypedData_v4', 'eth_signTransaction', 'eth_signAuthorization'] as const).map((method) => ({
      name: `any ${method}`,
      action: 'allow' as const,
      method,
    })),
    // On the length, which binary messages have too (a rule on the text would deny them all: docs/signing.md).
    {
      name: 'never this',
      action: 'deny' as const,
      method: 'personal_sign' as const,
      conditions: [{ field: 'length', op: 'eq' as const, value: 9 }],
    },
  ],
};

/** EIP-2612's permit, the typed data most wallets sign; bigints as the libraries hand them. */
const PERMIT_TYPES = {
  Permit: [
    { name: 'owner', type: 'address' },
    { name: 'spender', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
} as const;
const DOMAIN = { name: 'USD Coin', version: '2', chainId: CHAIN_ID, verifyingContract: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913' } as const;
const permit = (owner: `0x${string}`) => ({ owner, spender: TO, value: 10n ** 24n, nonce: 0n, deadline: 2n ** 255n });

describe('client adapters: a custody wallet as a viem account and an ethers signer (src/programs/client/viem.ts, ethers.ts)', function () {
  this.timeout(60_000);
  let env: Awaited<ReturnType<typeof startAppWithIdp>>;
  let backend: CustodyClient;
  let anonymous: CustodyClient;
  let wallet: { walletId: number; walletAddress: `0x${string}` };
  let project: { id: number; projectKey: string };
  let userJwt: string;

  before(async () => {
    env = await startAppWithIdp();
    const operator = new CustodyClient({ baseUrl: env.app.url, token: env.app.operatorToken });
    const iss = await env.idp.issuer('adapters');
    const org = await operator.createOrganisation('Adapters');
    project = await operator.createProject(org.id, { name: 'Adapters', issuer: iss.issuer });
    const admin = new CustodyClient({
      baseUrl: env.app.url,
      token: (await operator.createToken(org.id, { name: 'admin', role: 'admin', projectId: project.id })).token,
    });
    await admin.putPolicy(project.id, POLICY);
    backend = new CustodyClient({
      baseUrl: env.app.url,
      token: (await operator.createToken(org.id, { name: 'backend', role: 'signer', projectId: project.id })).token,
    });
    anonymous = new CustodyClient({ baseUrl: env.app.url });
    userJwt = await iss.sign({ email: 'ada@example.com' }, { audience: AUDIENCE });
    const signedIn = await anonymous.signIn(project.projectKey, userJwt);
    wallet = { walletId: signedIn.walletId, walletAddress: signedIn.walletAddress as `0x${string}` };
  });
  after(() => env.close());

  it('viem: a backend signs a message, typed data, transactions and an authorization through viem; ethers verifies each', async () => {
    const account = await toViemAccount(backend, { projectId: project.id, walletId: wallet.walletId });
    expect(account.address, 'read from the service').to.equal(wallet.walletAddress);
    expect(account.type).to.equal('local');

    for (const message of ['order 4711 approved', '0xdeadbeef is text to viem', 'ünïcødé ✓']) {
      expect(verifyMessage(message, await account.signMessage({ message })), message).to.equal(wallet.walletAddress);
    }
    const bytes = new Uint8Array([0, 1, 2, 0xff]);
    expect(verifyMessage(bytes, await account.signMessage({ message: { raw: bytes } }))).to.equal(wallet.walletAddress);
    expect(verifyMessage(bytes, await account.signMessage({ message: { raw: '0x000102ff' } }))).to.equal(wallet.walletAddress);

    const value = permit(wallet.walletAddress);
    const typedSignature = await account.signTypedData({ domain: DOMAIN, types: PERMIT_TYPES, primaryType: 'Permit', message: value });
    const ethersTypes = PERMIT_TYPES as unknown as Record<string, TypedDataField[]>;
    expect(verifyTypedData(DOMAIN, ethersTypes, value, typedSignature)).to.equal(wallet.walletAddress);

    const eip1559 = await account.signTransaction({
      chainId: CHAIN_ID,
      nonce: 7,
      gas: 21_000n,
      maxFeePerGas: 2_000_000_000n,
      maxPriorityFeePerGas: 1_000n,
      to: TO,
      value: 10n ** 15n,
    });
    const parsed = Transaction.from(eip1559);
    expect([parsed.from, parsed.type, parsed.nonce, parsed.value, parsed.chainId]).to.deep.equal([wallet.walletAddress, 2, 7, 10n ** 15n, BigInt(CHAIN_ID)]);
    const legacy = Transaction.from(await account.signTransaction({ chainId: CHAIN_ID, nonce: 8, gas: 50_000n, gasPrice: 3n, to: TO, data: '0xa9059cbb' }));
    expect([legacy.from, legacy.type, legacy.data]).to.deep.equal([wallet.walletAddress, 0, '0xa9059cbb']);
    const creation = Transaction.from(
      await account.signTransaction({ type: 'eip2930', chainId: CHAIN_ID, nonce: 9, gas: 90_000n, gasPrice: 3n, data: '0x6000' }),
    );
    expect([creation.from, creation.type, creation.to]).to.deep.equal([wallet.walletAddress, 1, null]);

    const authorization = await account.signAuthorization?.({ address: TO, chainId: CHAIN_ID, nonce: 3 });
    expect(authorization).to.include({ address: TO, chainId: CHAIN_ID, nonce: 3 });
    const { r = '0x', s = '0x', yParity = 0 } = authorization ?? {};
    expect(verifyAuthorization({ address: TO, chainId: BigInt(CHAIN_ID), nonce: 3n }, { r, s, yParity: yParity as 0 | 1 })).to.equal(wallet.walletAddress);
  });

  it("viem: existing wallet-client code signs through the service unchanged (the chain's serializer, a refusal as CustodyApiError)", async () => {
    const account = await toViemAccount(backend, { projectId: project.id, walletId: wallet.walletId, address: wallet.walletAddress });
    const chain = defineChain({
      id: CHAIN_ID,
      name: 'Test chain',
      nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
      rpcUrls: { default: { http: ['http://127.0.0.1:1'] } },
    });
    // No node is needed to sign: the transport answers only the chain id viem may ask for.
    const transport = custom({
      request: ({ method }: { method: string }) =>
        method === 'eth_chainId' ? Promise.resolve(`0x${CHAIN_ID.toString(16)}`) : Promise.reject(new Error(method)),
    });
    const walletClient = createWalletClient({ account, chain, transport });
    const signature = await walletClient.signMessage({ message: 'hello from a wallet client' });
    expect(verifyMessage('hello from a wallet client', signature)).to.equal(wallet.walletAddress);
    const typed = await walletClient.signTypedData({ domain: DOMAIN, types: PERMIT_TYPES, primaryType: 'Permit', message: permit(wallet.walletAddress) });
    expect(verifyTypedData(DOMAIN, PERMIT_TYPES as unknown as Record<string, TypedDataField[]>, permit(wallet.walletAddress), typed)).to.equal(
      wallet.walletAddress,
    );
    const serialized = await walletClient.signTransaction({ nonce: 1, gas: 21_000n, maxFeePerGas: 10n, maxPriorityFeePerGas: 1n, to: TO, value: 1n });
    expect(Transaction.from(serialized).from).to.equal(wallet.walletAddress);

    const refused = await account.signMessage({ message: 'forbidden' }).catch((e: unknown) => e);
    expect(refused).to.be.instanceOf(CustodyApiError);
    expect((refused as CustodyApiError).problem?.code).to.equal('policy_denied');
    expect((refused as CustodyApiError).problem?.detail).to.include('"never this"');
    const blob = await account
      .signTransaction({ chainId: CHAIN_ID, nonce: 1, gas: 21_000n, maxFeePerGas: 10n, maxPriorityFeePerGas: 1n, to: TO, authorizationList: [] })
      .catch((e: unknown) => e);
    expect(String(blob)).to.match(/type eip7702 are not signed/);
  });

  it('ethers: the user present signs a message, typed data, transactions and an authorization through an ethers Signer; viem verifies each', async () => {
    const signer = await CustodySigner.create(anonymous, { projectKey: project.projectKey, userJwt });
    expect(await signer.getAddress(), 'from sign-in').to.equal(wallet.walletAddress);

    for (const message of ['sign in to app.example.com', '0x1234 stays text in ethers']) {
      const signature = (await signer.signMessage(message)) as `0x${string}`;
      expect(await recoverMessageAddress({ message, signature }), message).to.equal(wallet.walletAddress);
    }
    const bytes = new Uint8Array([0xde, 0xad, 0xbe, 0xef]);
    const byteSignature = (await signer.signMessage(bytes)) as `0x${string}`;
    expect(await recoverMessageAddress({ message: { raw: bytes }, signature: byteSignature })).to.equal(wallet.walletAddress);

    const value = permit(wallet.walletAddress);
    const typedSignature = (await signer.signTypedData(DOMAIN, PERMIT_TYPES as unknown as Record<string, TypedDataField[]>, value)) as `0x${string}`;
    expect(
      await viemVerifyTypedData({
        address: wallet.walletAddress,
        domain: DOMAIN,
        types: PERMIT_TYPES,
        primaryType: 'Permit',
        message: value,
        signature: typedSignature,
      }),
    ).to.equal(true);
    expect(TypedDataEncoder.getPrimaryType(PERMIT_TYPES as unknown as Record<string, TypedDataField[]>)).to.equal('Permit');

    const signed = (await signer.signTransaction({
      chainId: CHAIN_ID,
      nonce: 2,
      gasLimit: 21_000n,
      maxFeePerGas: 2_000_000_000n,
      maxPriorityFeePerGas: 1_000n,
      to: TO,
      value: 5n,
      from: wallet.walletAddress,
    })) as TransactionSerialized;
    expect(await recoverTransactionAddress({ serializedTransaction: signed })).to.equal(wallet.walletAddress);
    const legacy = (await signer.signTransaction({ type: 0, chainId: CHAIN_ID, nonce: 3, gasLimit: 21_000n, gasPrice: 5n, to: TO })) as TransactionSerialized;
    expect(await recoverTransactionAddress({ serializedTransaction: legacy })).to.equal(wallet.walletAddress);
    expect(Transaction.from(legacy).type).to.equal(0);
    const wrongFrom = await signer.signTransaction({ chainId: CHAIN_ID, nonce: 3, gasLimit: 21_000n, gasPrice: 5n, to: TO, from: TO }).catch((e: unknown) => e);
    expect(String(wrongFrom)).to.match(/from address mismatch/);

    const auth = await signer.authorize({ address: TO, chainId: CHAIN_ID, nonce: 4 });
    expect([auth.address, auth.chainId, auth.nonce]).to.deep.equal([TO, BigInt(CHAIN_ID), 4n]);
    const recovered = await recoverAuthorizationAddress({
      authorization: {
        address: TO,
        chainId: CHAIN_ID,
        nonce: 4,
        r: auth.signature.r as `0x${string}`,
        s: auth.signature.s as `0x${string}`,
        yParity: auth.signature.yParity,
      },
    });
    expect(recovered).to.equal(wallet.walletAddress);

    const refused = await signer.signMessage('forbidden').catch((e: unknown) => e);
    expect((refused as CustodyApiError).problem?.code).to.equal('policy_denied');
  });

  it('each adapter works as either caller: viem for the user present, ethers for a backend (connect keeps the wallet)', async () => {
    const userAccount = await toViemAccount(anonymous, { projectKey: project.projectKey, userJwt, address: wallet.walletAddress });
    expect(verifyMessage('as the user', await userAccount.signMessage({ message: 'as the user' }))).to.equal(wallet.walletAddress);
    const backendSigner = (await CustodySigner.create(backend, { projectId: project.id, walletId: wallet.walletId })).connect(null);
    const signature = (await backendSigner.signMessage('as the backend')) as `0x${string}`;
    expect(await recoverMessageAddress({ message: 'as the backend', signature })).to.equal(wallet.walletAddress);
  });
});
