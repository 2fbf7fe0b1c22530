import type { EventDefinition } from '../webhooks/catalogue.js';

/** Every signing decision, allowed or denied (never the payload). */
export const SIGNING_EVENTS = [
  {
    name: 'wallet.signature.created',
    description: "A wallet signed: the project's policy allowed the operation.",
    data: '{ walletId, walletAddress, method, digest, caller, rule, policyVersion } (never the payload)',
  },
  {
    name: 'wallet.signature.denied',
    description: "The project's policy refused to let a wallet sign.",
    data: '{ walletId, walletAddress, method, digest, caller, rule (null: no rule allows it), policyVersion } (never the payload)',
  },
] as const satisfies readonly EventDefinition[];
