import { loadDataKeys } from '../../platform/config/config.js';
/** What the CLI takes from its environment: the one place it reads it. */
export interface CliEnv {
  /** CUSTODY_URL: the service (else --url, else http://127.0.0.1:8080). */
  readonly url: string | undefined;
  /** CUSTODY_TOKEN: the API token (else --token or --token-file). */
  readonly token: string | undefined;
  /** DATABASE_URL: for `custody migrate` and the audit commands that read the database. */
  readonly databaseUrl: string | undefined;
  /** DATA_ENCRYPTION_KEY and DATA_DECRYPTION_KEYS (or their _FILE forms): for `custody data-key`, read when it runs. */
  dataKeys(): { current: Buffer; decryptOnly: Buffer[] };
}

export function loadCliEnv(env: Readonly<Record<string, string | undefined>> = process.env): CliEnv {
  const plain = (name: string) => (env[name] === undefined || env[name] === '' ? undefined : env[name]);
  return { url: plain('CUSTODY_URL'), token: plain('CUSTODY_TOKEN'), databaseUrl: plain('DATABASE_URL'), dataKeys: () => loadDataKeys(env) };
}
