import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Config } from '../config/config.js';
import { newSecret } from '../crypto/secrets.js';
import type { Logger } from '../logging/logger.js';

const SIGNER_MAIN = fileURLToPath(new URL('../../../keyvault/main.js', import.meta.url));

export { SIGNER_ENV } from '../config/config.js';

export interface SignerChild {
  url: string;
  token: string;
  stop(): Promise<void>;
}

/**
 * ROLE=all: the signer as a child process on a Unix socket under DATA_DIR, with a fresh shared
 * secret. It has an IPC channel to us and exits when that closes, so it dies with its parent
 * even on SIGKILL; if it dies first, it is started again.
 */
export async function startSignerChild(config: Config, log: Logger): Promise<SignerChild> {
  const socket = path.join(config.dataDir, 'keyvault.sock');
  const token = newSecret('kv_');
  const env: NodeJS.ProcessEnv = {
    ...config.signerChildEnv,
    KEYVAULT_LISTEN: `unix:${socket}`,
    KEYVAULT_TOKEN: token,
    DATA_DIR: config.dataDir,
    APP_ENV: config.appEnv,
  };

  let stopping = false;
  let child: ChildProcess;
  const spawnOnce = () =>
    new Promise<void>((resolve, reject) => {
      child = fork(SIGNER_MAIN, [], { env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      child.once('message', () => resolve());
      child.once('exit', (code) => {
        reject(new Error(`the signer exited (${code ?? 'signal'}) before it was ready; see its message above`));
        if (!stopping) {
          log.error({ code }, 'the signer exited; starting it again in 1 s');
          setTimeout(() => void spawnOnce().catch(() => undefined), 1_000).unref();
        }
      });
    });
  try {
    await spawnOnce();
  } catch (err) {
    stopping = true;
    throw err;
  }
  return {
    url: `unix:${socket}`,
    token,
    stop: () =>
      new Promise<void>((resolve) => {
        stopping = true;
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
