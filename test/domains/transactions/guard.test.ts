import { expect } from 'chai';
import { SignerClient, projectUid, NonceConflictError } from '../../../src/platform/signer/client.js';
import { GWEI, sendingProject, sendPolicy, startChainEnv, type ChainEnv } from '../../support/chain.js';
import { sharedSigner } from '../../support/signer.js';
import { readDeploymentId } from '../../../src/platform/db/deployment.js';
import { until } from '../../support/wait.js';

const BOB = '0x0000000000000000000000000000000000000B0b';

/** The signer's nonce guard and the policy's budgets (docs/transactions.md). */
describe('transactions: one transaction per nonce in the signer, and budgets in wei', function () {
  this.timeout(120_000);
  let env: ChainEnv;
  before(async () => {
    env = await startChainEnv({ chain: { confirmations: 1 } });
  });
  after(() => env.close());

  it('the signer signs a second, different transaction at a nonce only when it names the first as replaced', async () => {
    const s = await sendingProject(env, 1, { rules: [{ name: 'raw', action: 'allow', method: 'eth_signTransaction' }] });
    const rpc = `/api/v1/project/${s.projectId}/wallets/${s.wallets[0]!.id}/rpc`;
    const tx = { chainId: 8453, nonce: 7, gas: 21000, maxFeePerGas: '1000000000', maxPriorityFeePerGas: '1', to: BOB, value: '1' };
    const first = await s.signer.post(rpc, { method: 'eth_signTransaction', params: { transaction: tx } });
    expect(first.status, first.text).to.equal(200);
    const hash = (first.body as { hash: string }).hash;
    const same = await s.signer.post(rpc, { method: 'eth_signTransaction', params: { transaction: tx } });
    expect(same.status, 'the same transaction again (a lost answer)').to.equal(200);
    expect((same.body as { hash: string }).hash).to.equal(hash);
    const other = { ...tx, value: '2' };
    const refused = await s.signer.post(rpc, { method: 'eth_signTransaction', params: { transaction: other } });
    expect(refused.status, refused.text).to.equal(409);
    expect(refused.problem.code).to.equal('nonce_conflict');
    const wrong = await s.signer.post(rpc, { method: 'eth_signTransaction', params: { transaction: other, replaces: `0x${'11'.repeat(32)}` } });
    expect(wrong.status, 'naming a transaction not signed there').to.equal(409);
    const replacement = await s.signer.post(rpc, { method: 'eth_signTransaction', params: { transaction: other, replaces: hash } });
    expect(replacement.status, replacement.text).to.equal(200);
    const elsewhere = await s.signer.post(rpc, { method: 'eth_signTransaction', params: { transaction: { ...other, nonce: 8 } } });
    expect(elsewhere.status, 'another nonce is free').to.equal(200);

    // Asked directly, as a compromised API could: a cancel that is not a no-op, and a second send at a nonce, are refused by the signer itself.
    const signer = sharedSigner();
    const client = new SignerClient(signer.url, signer.token, 10_000, await readDeploymentId(env.app.db));
    const wallet = (await env.app.db('wallets').where({ id: s.wallets[0]!.id }).first()) as { key_id: string };
    const project = projectUid(((await env.app.db('projects').where({ id: s.projectId }).first()) as { uid: string }).uid);
    await env.app.client.put(`/api/v1/project/${s.projectId}/policy`, {
      rules: [...sendPolicy.rules, { name: 'raw', action: 'allow', method: 'eth_signTransaction' }],
    });
    const send = (transaction: Record<string, unknown>, purpose: string, replaces?: string) =>
      client.sign(wallet.key_id, project, {
        caller: 'server',
        operation: { method: 'eth_sendTransaction', params: { transaction, purpose, ...(replaces ? { replaces } : {}) } },
      });
    await until('the new policy in the signer', async () => ((await send({ ...tx, nonce: 9 }, 'send')).allowed ? true : undefined));
    let conflict: unknown;
    await send({ ...tx, nonce: 9, value: '5' }, 'send').catch((e: unknown) => (conflict = e));
    expect(conflict).to.be.instanceOf(NonceConflictError);
    expect((conflict as NonceConflictError).signed).to.have.length(1);
    let notNoOp: unknown;
    await send({ ...tx, nonce: 9 }, 'cancel', (conflict as NonceConflictError).signed[0]).catch((e: unknown) => (notNoOp = e));
    expect((notNoOp as { status?: number }).status, 'a cancel must be a transfer of nothing to the wallet itself').to.equal(400);
    const noOp = await send({ ...tx, nonce: 9, to: s.wallets[0]!.address, value: '0' }, 'cancel', (conflict as NonceConflictError).signed[0]);
    expect(noOp.allowed).to.equal(true);
  });

  it('a budget in wei per wallet and per project: never exceeded, under concurrent sends', async () => {
    // Each send's maximum cost: 21,000 gas × 2 gwei + 0.001 ether.
    const cost = 21_000n * 2n * GWEI + 10n ** 15n;
    const fields = { to: BOB, value: String(10n ** 15n), gas: 21000, maxFeePerGas: String(2n * GWEI), maxPriorityFeePerGas: String(GWEI) };
    const policy = {
      rules: sendPolicy.rules,
      limits: [
        { method: 'eth_sendTransaction', per: 'wallet', window: '24h', wei: String(2n * cost + cost / 2n) },
        { method: 'eth_sendTransaction', per: 'project', window: '24h', wei: String(3n * cost) },
      ],
    };
    const s = await sendingProject(env, 2, policy);
    const path = (w: number) => `/api/v1/project/${s.projectId}/wallets/${s.wallets[w]!.id}/transactions`;
    type Out = { id: number; status: string; error: { code: string; message: string } | null };
    // Each send as it ends up: a 202 answers a send still queued behind its wallet's others.
    const settled = (sent: Array<{ body: unknown }>) =>
      until('every send signed or refused', async () => {
        const now = await Promise.all(
          sent.map(async (r) => (await s.signer.get(`/api/v1/project/${s.projectId}/transactions/${(r.body as Out).id}`)).body as Out),
        );
        return now.every((t) => t.status !== 'queued') ? now : undefined;
      });
    const first = await settled(await Promise.all(Array.from({ length: 6 }, () => s.signer.post(path(0), { chainId: env.anvil.chainId, ...fields }))));
    expect(
      first.filter((t) => t.status !== 'failed'),
      'two fit the wallet budget',
    ).to.have.length(2);
    const denied = first.find((b) => b.error);
    expect(denied?.error?.code).to.equal('policy_denied');
    expect(denied?.error?.message).to.match(/wei of eth_sendTransaction per wallet/);
    const second = await settled(await Promise.all(Array.from({ length: 4 }, () => s.signer.post(path(1), { chainId: env.anvil.chainId, ...fields }))));
    expect(
      second.filter((t) => t.status !== 'failed'),
      'one more fits the project budget',
    ).to.have.length(1);
    const bad = await s.admin.put(`/api/v1/project/${s.projectId}/policy`, {
      rules: [],
      limits: [{ method: 'personal_sign', per: 'wallet', window: '1h', wei: '5' }],
    });
    expect(bad.status, 'a budget counts transactions only').to.equal(400);
  });
});
