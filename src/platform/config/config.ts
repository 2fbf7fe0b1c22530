import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseCidrs } from '../net/egress.js';
import { readChains, type ChainConfig } from '../eth/chains.js';

/** Process roles of section 12. */
export const ROLES = ['all', 'api', 'worker', 'keyvault', 'migrate'] as const;
export type Role = (typeof ROLES)[number];

/**
 * What each role uses, and so all it is asked for: the one place that decides which settings a
 * role requires. `database`: `url` needs DATABASE_URL, `embedded` starts its own PostgreSQL without
 * one (development only); `signer`: `child` starts its own, `remote` needs KEYVAULT_URL and
 * KEYVAULT_TOKEN. The signer (ROLE=keyvault) is its own program with its own configuration
 * (keyvault/config.ts): nothing here is asked of it, and main.ts never reads this one for it.
 */
export interface RoleNeeds {
  readonly database: 'url' | 'embedded' | 'none';
  /** Serves the API: the audience of users' JWTs and the operator token. */
  readonly api: boolean;
  /** Opens sealed values (webhook secrets, stored answers): DATA_ENCRYPTION_KEY. */
  readonly dataKey: boolean;
  readonly signer: 'child' | 'remote' | 'none';
}
export const ROLE_NEEDS: Readonly<Record<Role, RoleNeeds>> = {
  all: { database: 'embedded', api: true, dataKey: true, signer: 'child' },
  api: { database: 'url', api: true, dataKey: true, signer: 'remote' },
  worker: { database: 'url', api: false, dataKey: true, signer: 'remote' },
  migrate: { database: 'embedded', api: false, dataKey: false, signer: 'none' },
  keyvault: { database: 'none', api: false, dataKey: false, signer: 'none' },
};

/** ROLE as main.ts dispatches on it, before any role's configuration is read. */
export function roleOf(env: Readonly<Record<string, string | undefined>> = process.env): Role {
  const v = env['ROLE'];
  if (v === undefined || v === '') return 'all';
  if ((ROLES as readonly string[]).includes(v)) return v as Role;
  throw new ConfigError([`ROLE must be one of ${ROLES.join(', ')} (got "${v}")`]);
}
export const APP_ENVS = ['testnet', 'production'] as const;
export type AppEnv = (typeof APP_ENVS)[number];
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Config {
  readonly role: Role;
  readonly host: string;
  readonly port: number;
  readonly appEnv: AppEnv;
  /** Unset means: start an embedded PostgreSQL under dataDir (ROLE=all and migrate only). */
  readonly databaseUrl: string | undefined;
  readonly dataDir: string;
  readonly embeddedPgPort: number;
  readonly serviceAudience: string;
  /** The deployment's public base URL (PUBLIC_BASE_URL): the `iss` of its attestations, where its JWKS is found. */
  readonly publicBaseUrl: string;
  /** How long a membership attestation is valid (ATTESTATION_TTL_S, default 5 minutes). */
  readonly attestationTtlS: number;
  /** How long the API keeps the signer's service keys before asking again (a rotation shows within this). */
  readonly serviceKeysCacheMs: number;
  /** How often the worker seals new audit rows into the chain (docs/audit.md). */
  readonly auditSealIntervalMs: number;
  /** How often the worker signs a checkpoint of the chain, when it grew. */
  readonly auditCheckpointIntervalMs: number;
  /**
   * The development identity provider (testnet only): projects whose issuer is DEV_ISSUER accept
   * tokens it signs, which `POST /api/v1/project/{projectId}/dev/token` (and `custody dev token`) mint.
   */
  readonly devIdp: boolean;
  /** The operator console at /console (CONSOLE_ENABLED, docs/console.md): on unless turned off. */
  readonly consoleEnabled: boolean;
  /** A console session's life (CONSOLE_SESSION_TTL_S), ended sooner by sign-out or the token's revocation. */
  readonly consoleSessionTtlS: number;
  /** Unset means: generated once into dataDir (testnet only). */
  readonly operatorToken: string | undefined;
  /** 32 raw bytes; unset means generated into dataDir (testnet only). New values are sealed under it. */
  readonly dataEncryptionKey: Buffer | undefined;
  /** Keys sealed values are only opened with (DATA_DECRYPTION_KEYS): the old key after a rotation, or the next one before it. */
  readonly dataDecryptionKeys: readonly Buffer[];
  readonly logLevel: LogLevel;
  readonly shutdownTimeoutMs: number;
  /** Time between SIGTERM (readyz turns 503) and closing the listener, for load balancers to notice. */
  readonly shutdownDelayMs: number;
  readonly dbPoolMax: number;
  /** Named prepared statements for the per-request lookups (off behind a transaction-mode pooler that cannot keep them). */
  readonly dbPreparedStatements: boolean;
  /** Lifetime of an entry of the API's project-key cache (0: no cache); see src/access/tenancy/key-cache.ts. */
  readonly projectCacheTtlMs: number;
  readonly idempotencyTtlS: number;
  /**
   * How long an Idempotency-Key record stays reserved for the request running it before another
   * request with the key may take it over: longer than any request runs (src/access/endpoints/idempotency.ts).
   */
  readonly idempotencyLeaseS: number;
  /** Where the signer is (`unix:/path` or http(s)://); unset in ROLE=all: the signer it starts. */
  readonly keyvaultUrl: string | undefined;
  /** Shared secret for the signer; unset in ROLE=all: generated for the signer it starts. */
  readonly keyvaultToken: string | undefined;
  readonly keyvaultTimeoutMs: number;
  /** For an https:// KEYVAULT_URL: the signer's CA (KEYVAULT_CA_FILE) and, for mutual TLS, our client certificate and key. */
  readonly keyvaultTls: { ca: string | undefined; cert: string | undefined; key: string | undefined };
  /** Extra CA bundle (PEM text) trusted for issuer discovery and key sets. */
  readonly oidcCa: string | undefined;
  /** Extra CA certificates (PEM) trusted for webhook receivers (WEBHOOK_CA_FILE), beside the system's. */
  readonly webhookCa: string | undefined;
  readonly jwksCacheTtlS: number;
  readonly jwtClockToleranceS: number;
  readonly jwksRefetchIntervalMs: number;
  readonly oidcFetchTimeoutMs: number;
  /** Delay before each attempt, in ms (the first is normally 0). */
  readonly webhookRetrySchedule: number[];
  readonly webhookConnectTimeoutMs: number;
  readonly webhookTimeoutMs: number;
  readonly walletWebhookBackgroundRetry: boolean;
  /** A subscription failing every attempt for this long is disabled (section 8: five days). */
  readonly webhookDisableAfterMs: number;
  /** Attempts in flight per destination host in one relay lane (WEBHOOK_HOST_CONCURRENCY, formerly WEBHOOK_ENDPOINT_CONCURRENCY). */
  readonly webhookHostConcurrency: number;
  /** Live webhook subscriptions a project may have. */
  readonly webhookSubscriptionsPerProject: number;
  /** Pending deliveries a subscription may have before its new events wait, compact, as deferred rows. */
  readonly webhookBacklogPerSubscription: number;
  /** CIDRs allowed as outbound targets although not public (every environment). */
  readonly egressAllowPrivate: string[];
  /** Why: set by EGRESS_ALLOW_PRIVATE, or loopback by default for the embedded development start. */
  readonly egressAllowSource: 'EGRESS_ALLOW_PRIVATE' | 'embedded development start' | 'none';
  /** Run the outbox relay inside ROLE=api too (ROLE=all and ROLE=worker always run it). */
  readonly relayInApi: boolean;
  /** Attempts in flight per lane (wallets, webhooks) in one relay. */
  readonly relayConcurrency: number;
  /** Attempts in flight per project per lane in one relay: one tenant never holds a lane. */
  readonly relayProjectConcurrency: number;
  readonly relayPollMs: number;
  /** Requests per window per API token (0: no limit). */
  readonly rateLimitToken: number;
  /** Requests per window per project on the wallet endpoints, counted by project key (0: no limit). */
  readonly rateLimitProject: number;
  readonly rateLimitWindowS: number;
  /** Failed authentications (unknown API token or project key) per client address per window; 0: off. */
  readonly rateLimitAuthFailures: number;
  /** How often each process sends its counted hits to the shared store (and learns the others'). */
  readonly rateLimitFlushMs: number;
  /** Redis for rate-limit counters; unset: PostgreSQL. */
  readonly redisUrl: string | undefined;
  /** Prefix of this deployment's Redis keys (deployments sharing a Redis need distinct ones). */
  readonly redisKeyPrefix: string;
  /** Done outbox rows older than this are deleted by the worker (0: kept for ever). */
  readonly outboxRetentionDays: number;
  /** How often the worker looks for memberships whose expiration passed (section 9: within a minute). */
  readonly schedulerIntervalMs: number;
  /** How long a relay holds a claimed outbox row: longer than any one attempt can take. */
  readonly relayLeaseMs: number;
  /** The chains transactions are sent on (CHAINS or CHAINS_FILE: operator configuration, a secret). */
  readonly chains: readonly ChainConfig[];
  /** How often the worker looks at queued and unsettled transactions (each chain at most once per its block time). */
  readonly transactionsTickMs: number;
  /** Unsettled transactions of a chain a settling pass looks at; passes rotate through them (docs/transactions.md). */
  readonly transactionsSettleWindow: number;
  /** Queues with queued sends a sending pass of the worker works; passes rotate through them. */
  readonly transactionsQueueWindow: number;
  /** How long `eth_sendTransaction` waits for its transaction to be signed before answering without a hash. */
  readonly sendWaitMs: number;
  /** How long a process holds a wallet's send queue for one send (signing, recording, broadcasting) before another may take it over. */
  readonly sendLeaseMs: number;
  /** ROLE=all: the variables of ours its signer child may see (SIGNER_ENV). */
  readonly signerChildEnv: Readonly<Record<string, string>>;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

type Env = Readonly<Record<string, string | undefined>>;

/**
 * What the signer child may see of our environment: the variables its configuration reads
 * (keyvault/config.ts; a test holds the two together) and the few the runtime needs. An
 * allow-list, so a secret of the API's or of the platform (database, cloud credentials) that
 * nobody thought of never reaches it.
 */
export const SIGNER_ENV =
  /^(APP_ENV|LOG_LEVEL|DATA_DIR|VAULT_(ADDR|NAMESPACE|CACERT|TIMEOUT_MS|ATTEMPTS|TOKEN|TOKEN_FILE|ROLE_ID|ROLE_ID_FILE|SECRET_ID|SECRET_ID_FILE|APPROLE_MOUNT|K8S_ROLE|K8S_MOUNT|K8S_TOKEN_FILE|TRANSIT_MOUNT|TRANSIT_KEY|SERVICE_KEY|KV_MOUNT|KV_PREFIX)|KEYVAULT_(KEYGEN_THREADS|READ_THREADS|LOCAL_LOCK_WAIT_MS|DATA_DIR|DEPLOYMENT_ID|RECOVERY_KEYS_FILE)|PATH|HOME|TZ|LANG|LC_ALL|TMPDIR)$/;

/** Reads a secret from `NAME` or from the file `NAME_FILE` names (a mounted Secret), noting problems. */
function secretReader(env: Env, problems: string[]): (name: string) => string | undefined {
  const plain = (name: string): string | undefined => (env[name] === undefined || env[name] === '' ? undefined : env[name]);
  return (name) => {
    const direct = plain(name);
    const file = plain(`${name}_FILE`);
    if (direct !== undefined && file !== undefined) {
      problems.push(`${name} and ${name}_FILE are both set; set only one`);
      return undefined;
    }
    if (file === undefined) return direct;
    try {
      // A trailing newline is how editors and `kubectl create secret --from-file` leave files.
      return readFileSync(file, 'utf8').replace(/\r?\n$/, '');
    } catch (err) {
      problems.push(`${name}_FILE: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
      return undefined;
    }
  };
}

// 32 bytes are exactly 43 base64 characters and one '=' of padding.
const BASE64_KEY = /^[A-Za-z0-9+/]{43}=$/;

/**
 * The data keys: DATA_ENCRYPTION_KEY seals new values; DATA_DECRYPTION_KEYS (comma-separated) only
 * open values, so the key rotates in place (docs/operations.md).
 */
function readDataKeys(secret: (name: string) => string | undefined, problems: string[]): { current: Buffer | undefined; decryptOnly: Buffer[] } {
  const text = secret('DATA_ENCRYPTION_KEY');
  let current: Buffer | undefined;
  if (text !== undefined) {
    if (BASE64_KEY.test(text)) current = Buffer.from(text, 'base64');
    else problems.push('DATA_ENCRYPTION_KEY must be 32 bytes encoded as base64 (e.g. `openssl rand -base64 32`)');
  }
  const decryptOnly: Buffer[] = [];
  const others = secret('DATA_DECRYPTION_KEYS');
  for (const item of others === undefined
    ? []
    : others
        .split(',')
        .map((t) => t.trim())
        .filter((t) => t !== '')) {
    if (!BASE64_KEY.test(item)) {
      problems.push('DATA_DECRYPTION_KEYS must be keys of 32 bytes encoded as base64, separated by commas');
      break;
    }
    const key = Buffer.from(item, 'base64');
    if (current?.equals(key) || decryptOnly.some((k) => k.equals(key))) {
      problems.push('DATA_DECRYPTION_KEYS names a key twice, or DATA_ENCRYPTION_KEY itself');
      break;
    }
    decryptOnly.push(key);
  }
  return { current, decryptOnly };
}

/** The data keys alone, for the CLI's `data-key` commands: DATA_ENCRYPTION_KEY is required there. */
export function loadDataKeys(env: Env = process.env): { current: Buffer; decryptOnly: Buffer[] } {
  const problems: string[] = [];
  const keys = readDataKeys(secretReader(env, problems), problems);
  if (keys.current === undefined && problems.length === 0) problems.push('DATA_ENCRYPTION_KEY is required');
  if (problems.length > 0 || keys.current === undefined) throw new ConfigError(problems);
  return { current: keys.current, decryptOnly: keys.decryptOnly };
}

/**
 * Reads the environment once. Every problem is collected, so an operator fixes all of them in
 * one go instead of one per restart. Secrets may come from `NAME_FILE` (a mounted Secret).
 */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];

  const plain = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v === '' ? undefined : v;
  };
  const secret = secretReader(env, problems);
  const oneOf = <T extends string>(name: string, allowed: readonly T[], fallback: T): T => {
    const v = plain(name);
    if (v === undefined) return fallback;
    if ((allowed as readonly string[]).includes(v)) return v as T;
    problems.push(`${name} must be one of ${allowed.join(', ')} (got "${v}")`);
    return fallback;
  };
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const v = plain(name);
    if (v === undefined) return fallback;
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) {
      problems.push(`${name} must be an integer from ${min} to ${max} (got "${v}")`);
      return fallback;
    }
    return Number(v);
  };

  const role = oneOf('ROLE', ROLES, 'all');
  if (role === 'keyvault') problems.push("ROLE=keyvault reads the signer's own configuration (keyvault/config.ts), not this one");
  const appEnv = oneOf('APP_ENV', APP_ENVS, 'testnet');
  const production = appEnv === 'production';
  // 0: any free port (tests running several workers on one host).
  const port = int('PORT', 8080, 0, 65535);
  const embeddedPgPort = int('EMBEDDED_PG_PORT', 54329, 1024, 65535);
  if (embeddedPgPort === 5432) problems.push('EMBEDDED_PG_PORT must not be 5432, which a system PostgreSQL may hold');

  const needs = ROLE_NEEDS[role];
  const databaseUrl = needs.database === 'none' ? undefined : secret('DATABASE_URL');
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    problems.push('DATABASE_URL must be a postgres:// or postgresql:// URL');
  }
  if (databaseUrl === undefined && needs.database === 'url') {
    problems.push(`DATABASE_URL is required for ROLE=${role} (the embedded PostgreSQL is only for ROLE=all and ROLE=migrate)`);
  } else if (databaseUrl === undefined && needs.database === 'embedded' && production) {
    problems.push('DATABASE_URL is required when APP_ENV=production (the embedded PostgreSQL is for development)');
  }

  const servesApi = needs.api;
  const serviceAudience = plain('SERVICE_AUDIENCE') ?? (production ? '' : 'urn:custody:testnet');
  if (serviceAudience === '' && servesApi) problems.push('SERVICE_AUDIENCE is required when APP_ENV=production');

  const operatorToken = servesApi ? secret('OPERATOR_TOKEN') : undefined;
  if (operatorToken !== undefined && !/^[\x21-\x7e]{32,256}$/.test(operatorToken)) {
    problems.push('OPERATOR_TOKEN must be 32 to 256 printable ASCII characters without spaces');
  }
  if (operatorToken === undefined && production && servesApi) problems.push('OPERATOR_TOKEN is required when APP_ENV=production');

  const { current: dataEncryptionKey, decryptOnly: dataDecryptionKeys } = needs.dataKey
    ? readDataKeys(secret, problems)
    : { current: undefined, decryptOnly: [] };
  if (dataEncryptionKey === undefined && production && needs.dataKey) problems.push('DATA_ENCRYPTION_KEY is required when APP_ENV=production');

  const keyvaultUrl = plain('KEYVAULT_URL');
  if (keyvaultUrl !== undefined && !/^(unix:\/.+|https?:\/\/.+)$/.test(keyvaultUrl)) {
    problems.push('KEYVAULT_URL must be unix:/absolute/path or an http(s):// URL');
  } else if (keyvaultUrl?.startsWith('http://') && !/^http:\/\/(127\.\d+\.\d+\.\d+|\[::1\]|localhost)(:\d+)?(\/|$)/i.test(keyvaultUrl)) {
    problems.push('KEYVAULT_URL to another host must be https:// (plain HTTP only on a Unix socket or loopback): see KEYVAULT_CA_FILE');
  }
  const keyvaultToken = needs.signer === 'remote' ? secret('KEYVAULT_TOKEN') : undefined;
  if (keyvaultToken !== undefined && !/^[\x21-\x7e]{32,256}$/.test(keyvaultToken)) {
    problems.push('KEYVAULT_TOKEN must be 32 to 256 printable ASCII characters');
  }
  if (needs.signer === 'remote' && (keyvaultUrl === undefined || keyvaultToken === undefined)) {
    problems.push(`KEYVAULT_URL and KEYVAULT_TOKEN are required for ROLE=${role} (ROLE=all starts its own signer)`);
  }

  const bool = (name: string, fallback: boolean): boolean => {
    const v = plain(name);
    if (v === undefined) return fallback;
    if (v === 'true' || v === '1') return true;
    if (v === 'false' || v === '0') return false;
    problems.push(`${name} must be true or false`);
    return fallback;
  };
  const devIdp = servesApi && bool('DEV_IDP', !production);
  if (devIdp && production) problems.push('DEV_IDP is refused when APP_ENV=production: the development identity provider signs a token for any e-mail');

  /** A PEM file named by `name`: certificates (CAs, a client certificate) must hold one; a key is read as it is. */
  const pemFrom = (name: string, kind: 'certificate' | 'key' = 'certificate'): string | undefined => {
    const file = plain(name);
    if (file === undefined) return undefined;
    try {
      const pem = readFileSync(file, 'utf8');
      if (kind === 'certificate' && !pem.includes('-----BEGIN CERTIFICATE-----')) problems.push(`${name}: ${file} holds no PEM certificate`);
      return pem;
    } catch {
      problems.push(`${name}: cannot read ${file}`);
      return undefined;
    }
  };
  const oidcCa = pemFrom('OIDC_CA_FILE');
  const keyvaultTls = { ca: pemFrom('KEYVAULT_CA_FILE'), cert: pemFrom('KEYVAULT_CLIENT_CERT_FILE'), key: pemFrom('KEYVAULT_CLIENT_KEY_FILE', 'key') };
  if ((keyvaultTls.cert === undefined) !== (keyvaultTls.key === undefined)) problems.push('KEYVAULT_CLIENT_CERT_FILE and KEYVAULT_CLIENT_KEY_FILE go together');
  const webhookCa = pemFrom('WEBHOOK_CA_FILE');
  const scheduleText = plain('WEBHOOK_RETRY_SCHEDULE') ?? '0,5000,300000,1800000,7200000,18000000,36000000,50400000,72000000,86400000';
  const webhookRetrySchedule = scheduleText.split(',').map((s) => s.trim());
  if (webhookRetrySchedule.length === 0 || webhookRetrySchedule.length > 50 || webhookRetrySchedule.some((s) => !/^\d{1,10}$/.test(s))) {
    problems.push('WEBHOOK_RETRY_SCHEDULE must be 1 to 50 comma-separated delays in ms');
  }
  // The embedded development start (no DATABASE_URL, testnet) talks to an IdP and receivers on this
  // machine: loopback is allowed there unless EGRESS_ALLOW_PRIVATE says otherwise (and it is said at start).
  const egressGiven = env['EGRESS_ALLOW_PRIVATE'];
  const embeddedDevelopment = databaseUrl === undefined && !production;
  const egress = parseCidrs(egressGiven ?? (embeddedDevelopment ? '127.0.0.0/8,::1/128' : ''));
  if (egress.problems.length > 0) problems.push(`EGRESS_ALLOW_PRIVATE: not CIDRs: ${egress.problems.join(', ')}`);
  const egressAllowSource = egressGiven !== undefined ? 'EGRESS_ALLOW_PRIVATE' : embeddedDevelopment ? 'embedded development start' : 'none';

  const webhookTimeoutMs = int('WEBHOOK_TIMEOUT_MS', 15_000, 10, 120_000);
  const relayConcurrency = int('RELAY_CONCURRENCY', 32, 1, 1_000);
  const redisUrl = secret('REDIS_URL');
  if (redisUrl !== undefined && !/^rediss?:\/\/.+/.test(redisUrl)) problems.push('REDIS_URL must be a redis:// or rediss:// URL');
  const keyvaultTimeoutMs = int('KEYVAULT_TIMEOUT_MS', 10_000, 100, 120_000);

  const publicBaseUrl = (plain('PUBLIC_BASE_URL') ?? `http://localhost:${port}`).replace(/\/+$/, '');
  if (!/^https?:\/\/[^/?#\s]+(\/[^?#\s]*)?$/.test(publicBaseUrl)) problems.push('PUBLIC_BASE_URL must be an http(s) URL without query or fragment');

  const config: Config = {
    role,
    publicBaseUrl,
    attestationTtlS: int('ATTESTATION_TTL_S', 300, 10, 86_400),
    serviceKeysCacheMs: int('SERVICE_KEYS_CACHE_MS', 10_000, 0, 3_600_000),
    auditSealIntervalMs: int('AUDIT_SEAL_INTERVAL_MS', 500, 10, 60_000),
    auditCheckpointIntervalMs: int('AUDIT_CHECKPOINT_INTERVAL_MS', 60_000, 100, 86_400_000),
    host: plain('HOST') ?? '0.0.0.0',
    port,
    appEnv,
    databaseUrl,
    dataDir: path.resolve(plain('DATA_DIR') ?? '.data'),
    embeddedPgPort,
    serviceAudience,
    devIdp,
    consoleEnabled: servesApi && bool('CONSOLE_ENABLED', true),
    consoleSessionTtlS: int('CONSOLE_SESSION_TTL_S', 43_200, 60, 604_800),
    operatorToken,
    dataEncryptionKey,
    dataDecryptionKeys,
    logLevel: oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
    shutdownTimeoutMs: int('SHUTDOWN_TIMEOUT_MS', 30_000, 0, 600_000),
    shutdownDelayMs: int('SHUTDOWN_DELAY_MS', 0, 0, 600_000),
    dbPoolMax: int('DB_POOL_MAX', 10, 1, 500),
    dbPreparedStatements: bool('DB_PREPARED_STATEMENTS', true),
    projectCacheTtlMs: int('PROJECT_CACHE_TTL_MS', 5_000, 0, 3_600_000),
    idempotencyTtlS: int('IDEMPOTENCY_TTL_S', 86_400, 1, 30 * 86_400),
    // A signature waits on the signer twice (policy, then sign or dry run); a minute more covers
    // its statements, each waiting at most the pool's 10 s for a connection.
    idempotencyLeaseS: Math.ceil((2 * keyvaultTimeoutMs) / 1000) + 60,
    keyvaultUrl,
    keyvaultToken,
    keyvaultTimeoutMs,
    keyvaultTls,
    oidcCa,
    webhookCa,
    jwksCacheTtlS: int('JWKS_CACHE_TTL_S', 600, 1, 86_400),
    jwtClockToleranceS: int('JWT_CLOCK_TOLERANCE_S', 30, 0, 600),
    jwksRefetchIntervalMs: int('JWKS_REFETCH_INTERVAL_MS', 1_000, 0, 3_600_000),
    oidcFetchTimeoutMs: int('OIDC_FETCH_TIMEOUT_MS', 5_000, 100, 60_000),
    webhookRetrySchedule: webhookRetrySchedule.map(Number),
    webhookConnectTimeoutMs: int('WEBHOOK_CONNECT_TIMEOUT_MS', 5_000, 10, 60_000),
    webhookTimeoutMs,
    walletWebhookBackgroundRetry: bool('WALLET_WEBHOOK_BACKGROUND_RETRY', true),
    webhookDisableAfterMs: int('WEBHOOK_DISABLE_AFTER_MS', 5 * 86_400_000, 0, 365 * 86_400_000),
    webhookHostConcurrency: int('WEBHOOK_HOST_CONCURRENCY', int('WEBHOOK_ENDPOINT_CONCURRENCY', 8, 1, 1_000), 1, 1_000),
    webhookSubscriptionsPerProject: int('WEBHOOK_SUBSCRIPTIONS_PER_PROJECT', 50, 1, 10_000),
    webhookBacklogPerSubscription: int('WEBHOOK_BACKLOG_PER_SUBSCRIPTION', 1_000, 1, 1_000_000),
    egressAllowPrivate: egress.cidrs,
    egressAllowSource,
    relayInApi: bool('RELAY_IN_API', false),
    relayConcurrency,
    relayProjectConcurrency: int('RELAY_PROJECT_CONCURRENCY', Math.max(1, Math.floor(relayConcurrency / 2)), 1, 1_000),
    relayPollMs: int('RELAY_POLL_MS', 1_000, 10, 60_000),
    schedulerIntervalMs: int('SCHEDULER_INTERVAL_MS', 10_000, 10, 60_000),
    outboxRetentionDays: int('OUTBOX_RETENTION_DAYS', 7, 0, 3_650),
    rateLimitToken: int('RATE_LIMIT_TOKEN', 18_000, 0, 10_000_000),
    rateLimitProject: int('RATE_LIMIT_PROJECT', 36_000, 0, 100_000_000),
    rateLimitWindowS: int('RATE_LIMIT_WINDOW_S', 60, 1, 3_600),
    rateLimitAuthFailures: int('RATE_LIMIT_AUTH_FAILURES', 60, 0, 1_000_000),
    rateLimitFlushMs: int('RATE_LIMIT_FLUSH_MS', 250, 10, 60_000),
    redisUrl,
    redisKeyPrefix: plain('REDIS_KEY_PREFIX') ?? `custody:${appEnv}`,
    relayLeaseMs: Math.max(webhookTimeoutMs, keyvaultTimeoutMs) + 5_000,
    chains: readChains(secret('CHAINS'), problems),
    transactionsTickMs: int('TRANSACTIONS_TICK_MS', 250, 10, 60_000),
    transactionsSettleWindow: int('TRANSACTIONS_SETTLE_WINDOW', 2_000, 1, 100_000),
    transactionsQueueWindow: int('TRANSACTIONS_QUEUE_WINDOW', 500, 1, 100_000),
    sendWaitMs: int('SEND_WAIT_MS', 15_000, 0, 120_000),
    // One send's steps: the signer's time limit and an RPC call's.
    sendLeaseMs: int('SEND_LEASE_MS', keyvaultTimeoutMs + 5_000, 1_000, 600_000),
    signerChildEnv: Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => SIGNER_ENV.test(e[0]) && e[1] !== undefined)),
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(config);
}
