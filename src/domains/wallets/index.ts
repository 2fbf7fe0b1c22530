import { defineDomain, type EndpointDeps } from '../domain.js';
import { ActivatedWallets } from './activated.js';
import type { WalletDeps } from './commands.js';
import { WALLET_EVENTS } from './events.js';
import { walletJobs } from './jobs.js';
import { walletEndpoints } from './routes.js';

const built = new WeakMap<object, WalletDeps>();

/**
 * The wallet lifecycle's services for one app (the signing domain uses them too): made once per
 * app's deps, so both domains read activated wallets through one cache.
 */
export function walletDeps(deps: Pick<EndpointDeps, 'db' | 'signer' | 'oidc' | 'now'>): WalletDeps {
  let wallets = built.get(deps);
  if (!wallets) {
    wallets = { db: deps.db, signer: deps.signer, oidc: deps.oidc, now: deps.now, activated: new ActivatedWallets() };
    built.set(deps, wallets);
  }
  return wallets;
}

export const walletsDomain = defineDomain({
  name: 'wallets',
  events: WALLET_EVENTS,
  endpoints: (deps) => walletEndpoints({ ...deps, wallets: walletDeps(deps) }),
  jobs: (deps) => ({ kinds: walletJobs(deps) }),
});
