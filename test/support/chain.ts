import { expect } from 'chai';
import { startAppWithIdp } from './app.js';
import { startAnvil, type Anvil } from './anvil.js';
import { createOrganisation, createProject, createToken } from './factories.js';
import type { Client } from './http.js';

const AUDIENCE = 'urn:custody:testnet';
export const GWEI = 1_000_000_000n;

/** A chain's configuration for the suites: caps high enough for anvil's 1 gwei base fee, short stuck time. */
export function chainConfig(anvil: Pick<Anvil, 'url' | 'chainId'>, extra: Record<string, unknown> = {}, rpcUrls: string[] = [anvil.url]) {
  return {
    chainId: anvil.chainId,
    name: 'anvil',
    rpcUrls,
    confirmations: 2,
    maxFeePerGas: String(50n * GWEI),
    maxPriorityFeePerGas: String(5n * GWEI),
    minPriorityFeePerGas: String(GWEI),
    blockTimeMs: 100,
    stuckAfterMs: 2_000,
    ...extra,
  };
}

/** A policy allowing every send (and its fee bumps, cancels and gap fills). */
export const sendPolicy = { rules: [{ name: 'sends', action: 'allow', method: 'eth_sendTransaction' }] };

export type ChainEnv = Awaited<ReturnType<typeof startChainEnv>>;

/** anvil, and the app (API and worker) sending on it, with an IdP and a webhook receiver. */
export async function startChainEnv(
  options: {
    chain?: Record<string, unknown>;
    env?: Record<string, string>;
    rpcUrls?: (anvil: Anvil) => string[] | Promise<string[]>;
    anvil?: Parameters<typeof startAnvil>[0];
  } = {},
) {
  const anvil = await startAnvil(options.anvil);
  const chain = chainConfig(anvil, options.chain, options.rpcUrls ? await options.rpcUrls(anvil) : undefined);
  const env = await startAppWithIdp({ CHAINS: JSON.stringify([chain]), TRANSACTIONS_TICK_MS: '50', SEND_WAIT_MS: '5000', ...options.env });
  return {
    ...env,
    anvil,
    chain,
    close: async () => {
      await env.close();
      await anvil.stop();
    },
  };
}

export interface Sender {
  projectId: number;
  organisationId: number;
  admin: Client;
  signer: Client;
  /** Wallets by index: id and address. */
  wallets: Array<{ id: number; address: string }>;
  userJwt: (email: string) => Promise<string>;
  projectKey: string;
}

/** A project with `count` signed-in users' wallets funded on the chain, a send policy, an admin and a signer token. */
export async function sendingProject(env: ChainEnv, count = 1, policy: unknown = sendPolicy): Promise<Sender> {
  const { app, idp, anvil } = env;
  const iss = await idp.issuer();
  const org = await createOrganisation(app.client);
  const project = await createProject(app.client, org.id, { issuer: iss.issuer });
  const userJwt = (email: string) => iss.sign({ email }, { audience: AUDIENCE });
  const wallets: Sender['wallets'] = [];
  for (let i = 0; i < count; i++) {
    const signin = await app.client.post('/api/v1/signin', { key: project.projectKey }, { token: await userJwt(`user${i}@example.com`) });
    expect(signin.status, signin.text).to.equal(200);
    wallets.push({ id: signin.body.walletId, address: signin.body.walletAddress });
    await anvil.fund(signin.body.walletAddress, 10n ** 20n);
  }
  const admin = app.client.withToken((await createToken(app.client, org.id, 'admin', project.id)).token);
  const minted = await app.client.post(`/api/v1/organisations/${org.id}/tokens`, { name: 'backend', role: 'signer', projectId: project.id });
  expect(minted.status, minted.text).to.equal(201);
  const put = await admin.put(`/api/v1/project/${project.id}/policy`, policy);
  expect(put.status, put.text).to.equal(201);
  return {
    projectId: project.id,
    organisationId: org.id,
    admin,
    signer: app.client.withToken(minted.body.token),
    wallets,
    userJwt,
    projectKey: project.projectKey,
  };
}
