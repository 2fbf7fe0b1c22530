import { attestationsDomain } from './attestations/index.js';
import { auditDomain } from './audit/index.js';
import { membershipsDomain } from './memberships/index.js';
import { organisationsDomain } from './organisations/index.js';
import { projectsDomain } from './projects/index.js';
import { signingDomain } from './signing/index.js';
import { tokensDomain } from './tokens/index.js';
import { transactionsDomain } from './transactions/index.js';
import { walletsDomain } from './wallets/index.js';
import { webhooksDomain } from './webhooks/index.js';
import type { Domain } from './domain.js';

/**
 * The one list of domains, in the order their endpoints are mounted and their events catalogued.
 * Every folder of domains/ is in it (test/domains/domains.test.ts).
 */
export const DOMAINS: readonly Domain[] = [
  organisationsDomain,
  projectsDomain,
  tokensDomain,
  walletsDomain,
  membershipsDomain,
  webhooksDomain,
  auditDomain,
  signingDomain,
  transactionsDomain,
  attestationsDomain,
];
