import { DependencyUnavailableError, KeyConflictError } from '../http/errors.js';
import type { Logger } from '../logging/logger.js';
import { developmentStoreInProduction, type SignerClient } from './client.js';
import type { AppEnv } from '../config/config.js';

/**
 * At start: the signer's store must be this deployment's (keyvault/README.md). Another deployment's store
 * refuses the start, naming it; a signer that cannot answer yet is not a reason to refuse (every
 * key creation carries the deployment id and is checked then).
 */
export async function bindSigner(signer: SignerClient, log: Logger, appEnv: AppEnv): Promise<void> {
  const health = await signer.health();
  if (developmentStoreInProduction(appEnv, health)) {
    throw new Error('refusing to start: APP_ENV=production, but the signer uses the local development key store; configure it with VAULT_ADDR');
  }
  try {
    await signer.bind();
    log.info({ deploymentId: signer.deploymentId }, `signer store bound to deployment ${signer.deploymentId}`);
  } catch (err) {
    if (err instanceof KeyConflictError) throw new Error(`refusing to start: ${err.why}`, { cause: err });
    if (!(err instanceof DependencyUnavailableError)) throw err;
    log.warn({ deploymentId: signer.deploymentId }, 'the signer is not reachable yet; its store is checked against this deployment on first use');
  }
}
