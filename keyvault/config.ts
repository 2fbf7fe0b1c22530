import { readFileSync } from 'node:fs';
import { defaultKeygenThreads } from './cpu.js';
import path from 'node:path';
import type { VaultAuth, VaultSettings } from './vault/adapter.js';
import type { VaultPaths } from './stores/vault.js';
import { DEPLOYMENT_ID } from './key-id.js';
import { parseOwners, type OwnerKey } from './policy/owners.js';

/**
 * The signer's own configuration (it shares nothing with src/, by design). Read once, every
 * problem listed in one message, `NAME_FILE` for every secret, no secret with a default.
 */
export interface SignerConfig {
  appEnv: 'testnet' | 'production';
  /** `unix:/path/to.sock` or `host:port`. */
  listen: { socketPath: string } | { host: string; port: number };
  token: string;
  /** KEYVAULT_TOKEN_PREVIOUS: also accepted, during a rotation of the token only (docs/operations.md, section 8). */
  previousToken: string | undefined;
  logLevel: string;
  /** Set: the Vault backend; unset: the local development store in `dataDir`. */
  vault: (VaultSettings & { paths: VaultPaths }) | undefined;
  dataDir: string;
  /** Worker threads generating keys; 0 generates on the main thread. */
  keygenThreads: number;
  /** Threads that read and hash large operations (keyvault/read-pool.ts); 0: the main thread reads everything. */
  readThreads: number;
  /** Local store: how long to wait at start for a previous signer on dataDir to exit. */
  localLockWaitMs: number;
  /** Set: the store is checked (or claimed) for this deployment before the signer listens. */
  deploymentId: string | undefined;
  /** P-256 public keys of the operator's recovery (KEYVAULT_RECOVERY_KEYS_FILE): they may replace a project's policy owners. */
  recoveryKeys: OwnerKey[];
  /** TLS for a listener another pod reaches (required off loopback); `clientCa`: mutual TLS. */
  tls: { cert: string; key: string; clientCa: string | undefined } | undefined;
}

/** Plain HTTP is for a Unix socket or loopback only: anything else crosses a network. */
export const loopbackHost = (host: string): boolean => /^(127\.\d+\.\d+\.\d+|::1|\[::1\]|localhost)$/i.test(host);

export class SignerConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid signer configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

type Env = Readonly<Record<string, string | undefined>>;

/** The environment's readers, each adding what is wrong to `problems`. */
function readers(env: Env, problems: string[]) {
  const plain = (name: string) => (env[name] === undefined || env[name] === '' ? undefined : env[name]);
  const secret = (name: string): string | undefined => {
    const direct = plain(name);
    const file = plain(`${name}_FILE`);
    if (direct !== undefined && file !== undefined) problems.push(`${name} and ${name}_FILE are both set; set only one`);
    if (file === undefined) return direct;
    try {
      return readFileSync(file, 'utf8').replace(/\r?\n$/, '');
    } catch {
      problems.push(`${name}_FILE: cannot read ${file}`);
      return undefined;
    }
  };
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const v = plain(name);
    if (v === undefined) return fallback;
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) {
      problems.push(`${name} must be an integer from ${min} to ${max}`);
      return fallback;
    }
    return Number(v);
  };
  return { plain, secret, int };
}

type VaultConfig = VaultSettings & { paths: VaultPaths };

/** VAULT_*: the address, exactly one auth method, the mounts and names; undefined without VAULT_ADDR. */
function readVault({ plain, secret, int }: ReturnType<typeof readers>, problems: string[]): VaultConfig | undefined {
  const addr = plain('VAULT_ADDR');
  if (addr === undefined) return undefined;
  if (!/^https?:\/\//.test(addr)) problems.push('VAULT_ADDR must be an http(s) URL');
  const vaultToken = secret('VAULT_TOKEN');
  const roleId = secret('VAULT_ROLE_ID');
  const secretId = secret('VAULT_SECRET_ID');
  const k8sRole = plain('VAULT_K8S_ROLE');
  const methods: VaultAuth[] = [];
  if (vaultToken !== undefined) methods.push({ kind: 'token', token: vaultToken });
  if (roleId !== undefined || secretId !== undefined) {
    if (roleId === undefined || secretId === undefined) problems.push('AppRole auth needs both VAULT_ROLE_ID and VAULT_SECRET_ID');
    else methods.push({ kind: 'approle', roleId, secretId, mount: plain('VAULT_APPROLE_MOUNT') ?? 'approle' });
  }
  if (k8sRole !== undefined) {
    methods.push({
      kind: 'kubernetes',
      role: k8sRole,
      mount: plain('VAULT_K8S_MOUNT') ?? 'kubernetes',
      jwtFile: plain('VAULT_K8S_TOKEN_FILE') ?? '/var/run/secrets/kubernetes.io/serviceaccount/token',
    });
  }
  if (methods.length !== 1) {
    problems.push('set exactly one Vault auth method: VAULT_TOKEN, VAULT_ROLE_ID + VAULT_SECRET_ID, or VAULT_K8S_ROLE');
  }
  const auth = methods[0];
  if (!auth) return undefined;
  return {
    addr,
    namespace: plain('VAULT_NAMESPACE'),
    caCertFile: plain('VAULT_CACERT'),
    timeoutMs: int('VAULT_TIMEOUT_MS', 5_000, 100, 120_000),
    attempts: int('VAULT_ATTEMPTS', 3, 1, 10),
    auth,
    paths: {
      transitMount: plain('VAULT_TRANSIT_MOUNT') ?? 'custody-transit',
      transitKey: plain('VAULT_TRANSIT_KEY') ?? 'custody-wallets',
      kvMount: plain('VAULT_KV_MOUNT') ?? 'custody-kv',
      kvPrefix: plain('VAULT_KV_PREFIX') ?? 'custody/keys',
      serviceKey: plain('VAULT_SERVICE_KEY') ?? 'custody-service',
    },
  };
}

/**
 * The rewrap job's configuration (keyvault/rewrap.ts): the signer's VAULT_* settings, read by
 * the same rules, under the job's own Vault identity; nothing else.
 */
export function loadRewrapConfig(env: Env = process.env): { vault: VaultConfig; logLevel: string } {
  const problems: string[] = [];
  const r = readers(env, problems);
  const vault = readVault(r, problems);
  if (r.plain('VAULT_ADDR') === undefined) problems.push('VAULT_ADDR is required: only the Vault store has transit key versions to move records to');
  if (problems.length > 0 || vault === undefined) throw new SignerConfigError(problems);
  return { vault, logLevel: r.plain('LOG_LEVEL') ?? 'info' };
}

export function loadSignerConfig(env: Env = process.env): SignerConfig {
  const problems: string[] = [];
  const r = readers(env, problems);
  const { plain, secret, int } = r;
  const appEnvRaw = plain('APP_ENV') ?? 'testnet';
  if (appEnvRaw !== 'testnet' && appEnvRaw !== 'production') problems.push('APP_ENV must be testnet or production');
  const appEnv = appEnvRaw === 'production' ? 'production' : 'testnet';

  const listenRaw = plain('KEYVAULT_LISTEN') ?? '127.0.0.1:8300';
  let listen: SignerConfig['listen'] = { host: '127.0.0.1', port: 8300 };
  if (listenRaw.startsWith('unix:')) listen = { socketPath: path.resolve(listenRaw.slice(5)) };
  else {
    const m = /^(.+):(\d{1,5})$/.exec(listenRaw);
    if (m?.[1] && Number(m[2]) <= 65535) listen = { host: m[1], port: Number(m[2]) };
    else problems.push('KEYVAULT_LISTEN must be unix:/path or host:port');
  }

  const token = secret('KEYVAULT_TOKEN');
  if (token === undefined) problems.push('KEYVAULT_TOKEN is required (the shared secret the API presents)');
  else if (!/^[\x21-\x7e]{32,256}$/.test(token)) problems.push('KEYVAULT_TOKEN must be 32 to 256 printable ASCII characters');
  const previousToken = secret('KEYVAULT_TOKEN_PREVIOUS');
  if (previousToken !== undefined && !/^[\x21-\x7e]{32,256}$/.test(previousToken))
    problems.push('KEYVAULT_TOKEN_PREVIOUS must be 32 to 256 printable ASCII characters');
  else if (previousToken !== undefined && previousToken === token) problems.push('KEYVAULT_TOKEN_PREVIOUS is the same as KEYVAULT_TOKEN: unset it');

  const vault = readVault(r, problems);
  if (plain('VAULT_ADDR') === undefined && appEnv === 'production')
    problems.push('VAULT_ADDR is required when APP_ENV=production: the local development key store is refused');

  const keygenThreads = int('KEYVAULT_KEYGEN_THREADS', defaultKeygenThreads(), 0, 64);
  const readThreads = int('KEYVAULT_READ_THREADS', defaultKeygenThreads(), 0, 64);
  const localLockWaitMs = int('KEYVAULT_LOCAL_LOCK_WAIT_MS', 15_000, 0, 600_000);
  const readPem = (name: string): string | undefined => {
    const file = plain(name);
    if (file === undefined) return undefined;
    try {
      return readFileSync(file, 'utf8');
    } catch {
      problems.push(`${name}: cannot read ${file}`);
      return undefined;
    }
  };
  const tlsCert = readPem('KEYVAULT_TLS_CERT_FILE');
  const tlsKey = readPem('KEYVAULT_TLS_KEY_FILE');
  const clientCa = readPem('KEYVAULT_TLS_CLIENT_CA_FILE');
  if ((tlsCert === undefined) !== (tlsKey === undefined)) problems.push('KEYVAULT_TLS_CERT_FILE and KEYVAULT_TLS_KEY_FILE go together');
  if (clientCa !== undefined && tlsCert === undefined)
    problems.push('KEYVAULT_TLS_CLIENT_CA_FILE (mutual TLS) needs KEYVAULT_TLS_CERT_FILE and KEYVAULT_TLS_KEY_FILE');
  const tls = tlsCert !== undefined && tlsKey !== undefined ? { cert: tlsCert, key: tlsKey, clientCa } : undefined;
  if ('host' in listen && !loopbackHost(listen.host) && tls === undefined) {
    problems.push(
      `KEYVAULT_LISTEN ${listenRaw} is reachable from other hosts: set KEYVAULT_TLS_CERT_FILE and KEYVAULT_TLS_KEY_FILE (plain HTTP only on a Unix socket or loopback)`,
    );
  }
  let recoveryKeys: OwnerKey[] = [];
  const recoveryFile = plain('KEYVAULT_RECOVERY_KEYS_FILE');
  if (recoveryFile !== undefined) {
    try {
      recoveryKeys = parseOwners(JSON.parse(readFileSync(recoveryFile, 'utf8')));
      if (recoveryKeys.length === 0) problems.push(`KEYVAULT_RECOVERY_KEYS_FILE: ${recoveryFile} holds no key`);
    } catch (err) {
      problems.push(
        `KEYVAULT_RECOVERY_KEYS_FILE: ${recoveryFile} is not a { "keys": [P-256 public JWKs] } document (${err instanceof Error ? err.message : 'unreadable'})`,
      );
    }
  }
  const deploymentId = plain('KEYVAULT_DEPLOYMENT_ID');
  if (deploymentId !== undefined && !DEPLOYMENT_ID.test(deploymentId))
    problems.push('KEYVAULT_DEPLOYMENT_ID must be a lower-case UUID (the API logs its deployment id at start)');

  if (problems.length > 0) throw new SignerConfigError(problems);
  return {
    appEnv,
    listen,
    token: token ?? '',
    previousToken,
    logLevel: plain('LOG_LEVEL') ?? 'info',
    vault,
    dataDir: path.resolve(plain('KEYVAULT_DATA_DIR') ?? path.join(plain('DATA_DIR') ?? '.data', 'keyvault')),
    keygenThreads,
    readThreads,
    localLockWaitMs,
    deploymentId,
    recoveryKeys,
    tls,
  };
}
