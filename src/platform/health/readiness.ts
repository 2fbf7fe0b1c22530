import type { Knex } from 'knex';
import type { AppEnv } from '../config/config.js';
import { databaseReachable } from '../db/health.js';
import { DependencyUnavailableError } from '../http/errors.js';
import { developmentStoreInProduction, type SignerClient } from '../signer/client.js';

export type KeyStoreState = 'ok' | 'sealed' | 'unavailable';

/**
 * What every endpoint needs: the database and the signer process (503 naming the one that is
 * not there). The signer's key store (Vault) is reported beside it, not required: while it is
 * sealed only key creation answers 503.
 */
export async function checkReadiness(db: Knex, signer: SignerClient, appEnv: AppEnv): Promise<{ keyStore: KeyStoreState }> {
  const [database, signerHealth] = await Promise.all([databaseReachable(db, 2_000), signer.health()]);
  if (!database) throw new DependencyUnavailableError('database');
  if (!signerHealth.reachable) throw new DependencyUnavailableError('signer');
  // Production end to end: a signer on the development key store is not one this deployment may use.
  if (developmentStoreInProduction(appEnv, signerHealth))
    throw new DependencyUnavailableError('signer (it uses the development key store, refused in production)');
  return { keyStore: signerHealth.ok ? 'ok' : signerHealth.sealed ? 'sealed' : 'unavailable' };
}
