import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { freePort } from './process.js';
import { toolPath } from './tools.js';

const SCRIPTS = fileURLToPath(new URL('../../../scripts/', import.meta.url));

/** A Vault-API server binary: $VAULT_BIN, or the one scripts/openbao.sh builds and caches. */
export const vaultBinary = (): string => toolPath('vault');

export interface DevVault {
  addr: string;
  rootToken: string;
  bin: string;
  /** Runs the CLI as root against this server. */
  cli(args: string[], input?: string): string;
  seal(): void;
  unseal(): void;
  /** Applies scripts/vault-setup.sh and returns AppRole credentials for the signer (or, `rewrap`, for the rewrap job). */
  setup(env?: Record<string, string>, role?: 'rewrap'): { VAULT_ROLE_ID: string; VAULT_SECRET_ID: string; VAULT_APPROLE_MOUNT: string };
  stop(): Promise<void>;
}

/** A throwaway `server -dev` of its own (in memory): never a shared service. */
export async function startDevVault(): Promise<DevVault> {
  const bin = vaultBinary();
  const port = await freePort();
  const addr = `http://127.0.0.1:${port}`;
  const rootToken = 'root';
  const proc: ChildProcess = spawn(bin, ['server', '-dev', `-dev-root-token-id=${rootToken}`, `-dev-listen-address=127.0.0.1:${port}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/root' },
  });
  let out = '';
  let failed: Error | undefined;
  proc.on('error', (err) => (failed = err));
  proc.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr?.on('data', (c: Buffer) => (out += c.toString()));
  const deadline = Date.now() + 60_000;
  while (!/Unseal Key: \S+/.test(out) || !/Root Token/.test(out)) {
    if (failed) throw new Error(`cannot run ${bin}: ${failed.message}`);
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`dev Vault did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const unsealKey = /Unseal Key: (\S+)/.exec(out)?.[1] ?? '';
  const env = { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/root', VAULT_ADDR: addr, VAULT_TOKEN: rootToken };
  const cli = (args: string[], input?: string) => execFileSync(bin, args, { env, encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] });
  // Wait until it answers requests.
  for (;;) {
    try {
      cli(['status']);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error('dev Vault did not answer');
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return {
    addr,
    rootToken,
    bin,
    cli,
    seal: () => void cli(['operator', 'seal']),
    unseal: () => void cli(['operator', 'unseal', unsealKey]),
    setup(extra = {}, role) {
      // AppRole from loopback, records where the signer's defaults look (custody-kv/custody/keys).
      const text = execFileSync('bash', [`${SCRIPTS}vault-setup.sh`, '--print-approle', ...(role ? [role] : [])], {
        env: { ...env, VAULT_BIN: bin, AUTH: 'approle', APPROLE_BOUND_CIDRS: '127.0.0.1/32', KV_PREFIX: 'custody/keys', ...extra },
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const get = (name: string) => new RegExp(`^${name}=(.+)$`, 'm').exec(text)?.[1] ?? '';
      return { VAULT_ROLE_ID: get('VAULT_ROLE_ID'), VAULT_SECRET_ID: get('VAULT_SECRET_ID'), VAULT_APPROLE_MOUNT: extra['APPROLE_MOUNT'] ?? 'custody-approle' };
    },
    stop: () =>
      new Promise<void>((resolve) => {
        if (proc.exitCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.kill('SIGTERM');
      }),
  };
}
