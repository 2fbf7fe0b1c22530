import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, spawnService, type Service } from './process.js';

export const SIGNER_MAIN = fileURLToPath(new URL('../../keyvault/main.js', import.meta.url));

export interface RunningSigner {
  url: string;
  token: string;
  service: Service;
  dataDir: string;
  /** SIGTERM and wait; keeps the data directory (a restart reuses it). */
  stop(): Promise<void>;
  /** stop() and remove the data directory. */
  destroy(): Promise<void>;
}

/**
 * The real signer process on a loopback port (local backend unless VAULT_ADDR is given), or with
 * `options.unixSocket` on a Unix socket in its data directory, as ROLE=all starts it.
 */
export async function startSigner(
  env: Record<string, string> = {},
  reuse?: { dataDir: string; token: string; port?: number },
  options: { unixSocket?: boolean; nodeArgs?: string[] } = {},
): Promise<RunningSigner> {
  const dataDir = reuse?.dataDir ?? mkdtempSync(path.join(tmpdir(), 'custody-signer-'));
  chmodSync(dataDir, 0o700);
  const token = reuse?.token ?? randomBytes(32).toString('base64url');
  const port = options.unixSocket ? 0 : (reuse?.port ?? (await freePort()));
  const listen = options.unixSocket ? `unix:${path.join(dataDir, 'signer.sock')}` : `127.0.0.1:${port}`;
  const service = spawnService({ KEYVAULT_LISTEN: listen, KEYVAULT_TOKEN: token, KEYVAULT_DATA_DIR: dataDir, ...env }, SIGNER_MAIN, options.nodeArgs);
  await service.waitFor(/keyvault listening/, 30_000);
  const stop = async () => {
    if (service.proc.exitCode === null && service.proc.signalCode === null) {
      service.proc.kill('SIGTERM');
      await service.exited;
    }
  };
  return {
    url: options.unixSocket ? listen : `http://127.0.0.1:${port}`,
    token,
    service,
    dataDir,
    stop,
    destroy: async () => {
      await stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

let shared: RunningSigner | undefined;
export const setSharedSigner = (s: RunningSigner | undefined) => {
  shared = s;
};
export function sharedSigner(): RunningSigner {
  if (!shared) throw new Error('the shared signer is not running (test/support/hooks.ts)');
  return shared;
}

/** Every record of a local-backend key store, as the signer wrote it (keys.log, one JSON line per key). */
export function localKeyRecords(dataDir: string): Array<{ keyId: string; address: string; ciphertext: string; context: string; projectId?: string }> {
  let text = '';
  try {
    text = readFileSync(path.join(dataDir, 'keys.log'), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as { keyId: string; address: string; ciphertext: string; context: string; projectId?: string });
}
