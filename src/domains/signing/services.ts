import { DecisionLog } from './decisions.js';
import { PolicyLimits } from './policies/limits.js';
import type { SignDeps } from './sign.js';

const built = new WeakMap<object, Pick<SignDeps, 'limits' | 'decisions'>>();

/**
 * The process's policy limits and decision log (one each, whichever domain signs: the rpc
 * endpoints, the transactions' sends), kept per signer client: the API and the worker of one
 * process share them, so a policy written through this process applies to both at once.
 */
export function signingServices(deps: Pick<SignDeps, 'db' | 'signer' | 'now'>): SignDeps {
  let services = built.get(deps.signer);
  if (!services) {
    services = { limits: new PolicyLimits(deps.signer, deps.now), decisions: new DecisionLog(deps.db) };
    built.set(deps.signer, services);
  }
  return { db: deps.db, signer: deps.signer, now: deps.now, ...services };
}
