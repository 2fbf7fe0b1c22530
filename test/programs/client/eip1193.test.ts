import { expect } from 'chai';
import { BrowserProvider, verifyMessage, verifyTypedData, type TypedDataField } from 'ethers';
import { createPublicClient, createWalletClient, custom, defineChain, http, type Hex } from 'viem';
import { CustodyClient } from '../../../src/programs/client/index.js';
import { CustodyTransactionPendingError, Eip1193RpcError, sendParams, toEip1193Provider } from '../../../src/programs/client/eip1193.js';
import { GWEI, sendingProject, sendPolicy, startChainEnv, type ChainEnv } from '../../support/chain.js';
import { until } from '../../support/wait.js';

const TO: `0x${string}` = '0x0000000000000000000000000000000000000B0b';
/** Sends, and signing messages and typed data, for both callers. */
const POLICY = {
  rules: [
    ...sendPolicy.rules,
    { name: 'messages', action: 'allow', method: 'personal_sign' },
    { name: 'typed data', action: 'allow', method: 'eth_signTypedData_v4' },
  ],
};
const MAIL_TYPES = {
  Mail: [
    { name: 'to', type: 'address' },
    { name: 'contents', type: 'string' },
  ],
} as const;

describe('client: a custody wallet as an EIP-1193 provider (src/programs/client/eip1193.ts), against the service and a real node', function () {
  this.timeout(120_000);
  let env: ChainEnv;
  before(async () => {
    env = await startChainEnv();
  });
  after(() => env.close());

  const chain = () =>
    defineChain({
      id: env.anvil.chainId,
      name: 'anvil',
      nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
      rpcUrls: { default: { http: [env.anvil.url] } },
    });
  const options = () => ({ chainId: env.anvil.chainId, rpcUrl: env.anvil.url });

  it('viem: a wallet client on a custom transport sends through the service (mined from the wallet), signs, and reads the node through it', async () => {
    const s = await sendingProject(env, 1, POLICY);
    const w = s.wallets[0]!;
    const client = new CustodyClient({ baseUrl: env.app.url, token: s.signer.token ?? '' });
    // The address is read from the service (the backend's getWallet).
    const provider = toEip1193Provider(client, { projectId: s.projectId, walletId: w.id }, options());
    const address = w.address as `0x${string}`;
    const wallet = createWalletClient({ account: address, chain: chain(), transport: custom(provider) });
    expect(await wallet.getAddresses()).to.deep.equal([address]);
    expect(await wallet.getChainId()).to.equal(env.anvil.chainId);

    const hash = await wallet.sendTransaction({ to: TO, value: 1234n });
    const node = createPublicClient({ chain: chain(), transport: http(env.anvil.url) });
    const receipt = await node.waitForTransactionReceipt({ hash });
    expect(receipt.status).to.equal('success');
    expect(receipt.from).to.equal(address.toLowerCase());
    expect(receipt.to).to.equal(TO.toLowerCase());
    const sent = await node.getTransaction({ hash });
    expect(sent.value).to.equal(1234n);
    expect(sent.nonce, 'the service chose the nonce').to.equal(0);
    // The service knows it by that hash.
    const listed = await client.transactions.list(s.projectId, { walletId: w.id });
    expect(listed.transactions.map((t) => t.hash)).to.deep.equal([hash]);

    const message = 'order 7 via an EIP-1193 provider';
    const signature = await wallet.signMessage({ message });
    expect(verifyMessage(message, signature)).to.equal(address);
    const domain = { name: 'Mail', version: '1', chainId: env.anvil.chainId, verifyingContract: TO } as const;
    const mail = { to: TO, contents: 'hello' };
    const typed = await wallet.signTypedData({ domain, types: MAIL_TYPES, primaryType: 'Mail', message: mail });
    expect(verifyTypedData(domain, MAIL_TYPES as unknown as Record<string, TypedDataField[]>, mail, typed)).to.equal(address);

    // Every other method is the node's, through the provider.
    const reader = createPublicClient({ chain: chain(), transport: custom(provider) });
    expect(await reader.getBlockNumber()).to.equal(await node.getBlockNumber());
    expect(await reader.getBalance({ address })).to.equal(await node.getBalance({ address }));
  });

  it('ethers: a BrowserProvider signer of the user present sends through the service, mined from the wallet', async () => {
    const s = await sendingProject(env, 1, POLICY);
    const w = s.wallets[0]!;
    // No token: the user's JWT and the project key; the address from sign-in.
    const client = new CustodyClient({ baseUrl: env.app.url });
    const provider = new BrowserProvider(toEip1193Provider(client, { projectKey: s.projectKey, userJwt: await s.userJwt('user0@example.com') }, options()));
    const signer = await provider.getSigner(w.address);
    expect(await signer.getAddress()).to.equal(w.address);
    const first = await signer.sendTransaction({ to: TO, value: 5n });
    const second = await signer.sendTransaction({ to: TO, value: 6n });
    const receipts = await Promise.all([first.wait(), second.wait()]);
    expect(receipts.map((r) => [r?.status, r?.from, r?.to])).to.deep.equal([
      [1, w.address, TO],
      [1, w.address, TO],
    ]);
    const mined = await Promise.all([first, second].map((t) => env.anvil.rpc<{ nonce: Hex; value: Hex }>('eth_getTransactionByHash', [t.hash])));
    expect(mined.map((t) => [Number(t.nonce), BigInt(t.value)])).to.deep.equal([
      [0, 5n],
      [1, 6n],
    ]);
    const signature = await signer.signMessage('signed in through ethers');
    expect(verifyMessage('signed in through ethers', signature)).to.equal(w.address);
    // Another address is not this provider's to sign for.
    const other = await provider.send('personal_sign', ['0x68656c6c6f', TO]).catch((e: unknown) => e);
    expect(String(other)).to.match(/not this provider's wallet/);
  });

  it("a send that waits in its queue (the market above the chain's fee cap) is an error naming its transaction, which is sent when fees fall", async () => {
    const s = await sendingProject(env, 1, POLICY);
    const w = s.wallets[0]!;
    const client = new CustodyClient({ baseUrl: env.app.url, token: s.signer.token ?? '' });
    const provider = toEip1193Provider(client, { projectId: s.projectId, walletId: w.id, address: w.address }, options());
    // The next blocks' base fee well above the cap (50 gwei), from the block mined now on.
    await env.anvil.rpc('anvil_setNextBlockBaseFeePerGas', [`0x${(200n * GWEI).toString(16)}`]);
    await env.anvil.rpc('anvil_mine', ['0x1']);
    // The service shares one fee answer per chain for a quarter of its block time: one from before the spike has gone by then.
    await new Promise((r) => setTimeout(r, 300));
    try {
      const pending = await provider.request({ method: 'eth_sendTransaction', params: [{ from: w.address, to: TO, value: '0x7' }] }).catch((e: unknown) => e);
      expect(pending).to.be.instanceOf(CustodyTransactionPendingError);
      const { transactionId, status, waiting, message } = pending as CustodyTransactionPendingError;
      expect(message).to.include(`transaction ${transactionId}`);
      expect([status, waiting]).to.deep.equal(['queued', 'fees_above_cap']);
      const held = await client.transactions.get(s.projectId, transactionId);
      expect([held.status, held.hash]).to.deep.equal(['queued', null]);
      // Empty blocks bring the base fee down (12.5% each); the worker then sends it.
      await env.anvil.rpc('anvil_mine', ['0x10']);
      const sent = await until('the queued send mined', async () => {
        const t = await client.transactions.get(s.projectId, transactionId);
        return t.status === 'mined' || t.status === 'confirmed' ? t : undefined;
      });
      const onChain = await env.anvil.rpc<{ from: string; value: Hex }>('eth_getTransactionByHash', [sent.hash]);
      expect([onChain.from.toLowerCase(), BigInt(onChain.value)]).to.deep.equal([w.address.toLowerCase(), 7n]);
    } finally {
      await env.anvil.rpc('anvil_mine', ['0x10']);
    }
  });

  it('maps a transaction object to the service: the nonce left to it, gasLimit and input read, the chain filled, what it cannot send refused', () => {
    expect(
      sendParams(
        { from: TO, to: TO, value: '0x1', nonce: '0x9', gasLimit: '0x5208', input: '0x00', maxFeePerGas: '0x2', maxPriorityFeePerGas: '0x1', type: '0x2' },
        5,
      ),
    ).to.deep.equal({
      transaction: { from: TO, to: TO, value: '0x1', gas: '0x5208', data: '0x00', maxFeePerGas: '0x2', maxPriorityFeePerGas: '0x1', chainId: 5 },
    });
    expect(sendParams({ to: null, data: '0x6000', chainId: '0x1', accessList: [] }, 5)).to.deep.equal({
      transaction: { to: null, data: '0x6000', chainId: '0x1' },
    });
    for (const [tx, why] of [
      [{ to: TO, gasPrice: '0x1' }, /gasPrice/],
      [{ to: TO, type: '0x0' }, /type "0x0"/],
      [{ to: TO, accessList: [{ address: TO, storageKeys: [] }] }, /access list/],
      [{ to: TO, blobs: [] }, /does not take blobs/],
      ['0x', /transaction object/],
    ] as const) {
      expect(() => sendParams(tx, 5), String(why))
        .to.throw(Eip1193RpcError, why)
        .with.property('code', -32602);
    }
  });
});
