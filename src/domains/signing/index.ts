import { defineDomain } from '../domain.js';
import { policyOwnerEndpoints } from './policies/owner-routes.js';
import { pruneSignatures } from './policies/limits.js';
import { policyEndpoints } from './policies/routes.js';
import { rpcEndpoints } from './rpc-routes.js';
import { walletDeps } from '../wallets/index.js';
import { SIGNING_EVENTS } from './events.js';
import { signingServices } from './services.js';
import { transactionDeps } from '../transactions/index.js';

/** Signing: the rpc endpoints, the decision log, the policies and their rolling-window limits. */
export const signingDomain = defineDomain({
  name: 'signing',
  events: SIGNING_EVENTS,
  endpoints: (deps) => {
    // The limits are counted here, on PostgreSQL; the policy endpoints drop what they knew of a project's.
    const signing = signingServices(deps);
    const limits = signing.limits;
    return [
      ...rpcEndpoints({ ...deps, wallets: { ...walletDeps(deps), ...signing }, transactions: transactionDeps(deps) }),
      ...policyEndpoints({ ...deps, limits }),
      ...policyOwnerEndpoints(deps),
    ];
  },
  periodic: (deps) => [
    // Signatures older than the longest limit window count for nothing.
    { name: 'signature-prune', role: 'worker', everyMs: 600_000, run: () => pruneSignatures(deps.db) },
  ],
});
