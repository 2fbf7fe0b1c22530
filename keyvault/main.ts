import { chmodSync, rmSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { loadSignerConfig, SignerConfigError, type SignerConfig } from './config.js';
import { KeyCreator } from './create-key.js';
import { OwnerStore } from './policy/owners.js';
import { PolicyStore } from './policy/store.js';
import { Signer } from './signing.js';
import { KeygenPool } from './keygen-pool.js';
import { ReadPool } from './read-pool.js';
import { signDigest } from './sign/ecdsa.js';
import { SignerError } from './errors.js';
import { createSignerLog } from './log.js';
import { createSignerServer } from './server.js';
import { ServiceKey } from './service-key.js';
import { LocalKeyStore } from './stores/local.js';
import type { KeyStore } from './stores/types.js';
import { VaultKeyStore } from './stores/vault.js';
import { VaultAdapter } from './vault/adapter.js';

function openStore(config: SignerConfig, log: ReturnType<typeof createSignerLog>): KeyStore {
  if (config.vault) return new VaultKeyStore(new VaultAdapter(config.vault, log), config.vault.paths);
  // The expected store of a local start (production refuses it), so said at info, not warned.
  log.info({ dir: config.dataDir }, 'DEVELOPMENT key store: keys are encrypted under a local master key file, not Vault (refused in production)');
  return new LocalKeyStore(config.dataDir, config.localLockWaitMs);
}

/** The signer process: config → key store → startup checks → versioned API. */
export async function runSigner(env?: Readonly<Record<string, string | undefined>>): Promise<void> {
  let config: SignerConfig;
  try {
    config = loadSignerConfig(env);
  } catch (err) {
    if (err instanceof SignerConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const log = createSignerLog(config.logLevel);
  const store = openStore(config, log);
  const pool = new KeygenPool(config.keygenThreads);
  const creator = new KeyCreator(store, () => pool.generate());
  try {
    await store.check();
    if (config.deploymentId !== undefined) await creator.bind(config.deploymentId);
    // The service key's versions read once: a key that is not P-256 stops the start here.
    await new ServiceKey(store).keys();
  } catch (err) {
    const message = err instanceof SignerError ? err.message : String(err);
    process.stderr.write(`keyvault: refusing to start: ${message}\n`);
    process.exit(1);
  }
  // The first signature warms libsecp256k1 and the code around it: paid here, with a key that is no
  // one's, rather than by the first request's event loop.
  signDigest(new Uint8Array(32).fill(1), new Uint8Array(32).fill(1));
  const reader = new ReadPool(config.readThreads);
  const policies = new PolicyStore(store, Date.now, 1_000, (document) => reader.policy(document));
  const signer = new Signer(store, policies);
  const owners = new OwnerStore(store);
  const server = createSignerServer({
    token: config.token,
    previousToken: config.previousToken,
    creator,
    store,
    serviceKey: new ServiceKey(store),
    signer,
    policies,
    owners,
    reader,
    recoveryKeys: config.recoveryKeys,
    log,
    tls: config.tls,
  });
  const where =
    'socketPath' in config.listen
      ? `unix:${config.listen.socketPath}`
      : `${config.tls ? 'https' : 'http'}://${config.listen.host}:${config.listen.port}${config.tls?.clientCa ? ' (mutual TLS)' : ''}`;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    if ('socketPath' in config.listen) {
      rmSync(config.listen.socketPath, { force: true });
      server.listen(config.listen.socketPath, () => {
        if ('socketPath' in config.listen) chmodSync(config.listen.socketPath, 0o600);
        resolve();
      });
    } else {
      server.listen(config.listen.port, config.listen.host, () => resolve());
    }
  });
  log.info({ listen: where, backend: store.backend }, `keyvault listening on ${where} (${store.backend} backend)`);

  const stop = () => {
    server.close(() => {
      store.close();
      void Promise.all([pool.close(), reader.close()]).finally(() => process.exit(0));
    });
    server.closeIdleConnections();
    // Keep-alive connections of a busy client would hold close() open; in-flight creations are
    // crash-safe (write-once), so after a grace period the rest is cut.
    setTimeout(() => server.closeAllConnections(), 5_000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  // Started by ROLE=all with an IPC channel: tell the parent, and die with it.
  if (process.send) {
    process.send({ ready: true, listen: where });
    process.on('disconnect', () => process.exit(0));
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  runSigner().catch((err: unknown) => {
    process.stderr.write(`keyvault: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
