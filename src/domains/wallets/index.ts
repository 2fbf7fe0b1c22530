import { defineDomain, type EndpointDeps } from '../domain.js';
import { ActivatedWallets } from './activated.js';
import type { WalletDeps } from './commands.js';
import { WALLET_EVENTS } from './events.js';
import { walletJobs } from './jobs.js';
import { walletEndpoints } from './routes.js';

/** The wallet lifecycle's services for one process (the signing domain uses them too). */
export const walletDeps = (deps: Pick<EndpointDeps, 'db' | 'signer' | 'oidc' | 'now'>): WalletDeps => ({
  db: deps.db,
  signer: deps.signer,
  oidc: deps.oidc,
  now: deps.now,
  activated: new ActivatedWallets(),
});

export const walletsDomain = defineDomain({
  name: 'wallets',
  events: WALLET_EVENTS,
  endpoints: (deps) => walletEndpoints({ ...deps, wallets: walletDeps(deps) }),
  jobs: (deps) => ({ kinds: walletJobs(deps) }),
});
