import { pathToFileURL } from 'node:url';
import { secp256k1 } from '@noble/curves/secp256k1.js';
import { pino } from 'pino';
import { loadRewrapConfig, SignerConfigError } from './config.js';
import { SignerError } from './errors.js';
import { addressOfPublicKey } from './eth.js';
import { KEY_ID } from './key-id.js';
import { createSignerLog } from './log.js';
import type { KeyRecord } from './stores/types.js';
import { VaultKeyStore, type VaultPaths } from './stores/vault.js';
import { VaultAdapter } from './vault/adapter.js';

/**
 * `custody vault rewrap` (docs/operations.md, "Rotation"): every key record's ciphertext moved to
 * the transit key's newest version. A role of the keyvault program with a Vault identity of its
 * own (keyvault/vault/policies/rewrap.hcl), not a route of the signer: the signer's policy stays
 * write-once and the signer never gains `update` on its records (docs/decisions.md).
 *
 * Per record: read its newest KV version; skip it when its ciphertext is on the newest transit
 * version; else rewrap (Vault re-encrypts inside, no key crosses), decrypt the new ciphertext and
 * derive the address, which must be the record's, zero the key, and only then write the record as
 * the next KV version with check-and-set on the version read. Each record is done or not, so a run
 * stopped anywhere (a crash, SIGTERM) leaves nothing half-way, and the next run continues.
 */

export interface RewrapSummary {
  /** The transit key's newest version, which every record is moved to. */
  latestVersion: number;
  records: number;
  moved: number;
  alreadyCurrent: number;
  failed: number;
  /** True when a stop request ended the run before every record was seen. */
  interrupted: boolean;
}

export interface RewrapOptions {
  /** Wait between two moved records: spares a Vault other teams use. */
  paceMs: number;
  /** Report what would move; write nothing. */
  dryRun: boolean;
  /** One line per record and a running count. */
  progress: (line: string) => void;
  /** Checked between records: true stops the run there. */
  stopping: () => boolean;
}

const VERSION = /^vault:v(\d+):/;

/** The transit version a ciphertext was made with. */
export function ciphertextVersion(ciphertext: string): number {
  const m = VERSION.exec(ciphertext);
  if (!m) throw new SignerError('invalid_request', 'a record holds no transit ciphertext');
  return Number(m[1]);
}

export async function rewrapRecords(vault: VaultAdapter, paths: VaultPaths, options: RewrapOptions): Promise<RewrapSummary> {
  const { transitMount, transitKey, kvMount, kvPrefix } = paths;
  await vault.login();
  const key = await vault.read(`${transitMount}/keys/${transitKey}`);
  const latestVersion = Number(key.data?.['latest_version'] ?? 0);
  if (!Number.isSafeInteger(latestVersion) || latestVersion < 1) throw new SignerError('misconfigured', `transit key ${transitKey} has no version`);
  // Keys only: the documents beside them (policies/, owners/, key-projects/, deployment) hold no key.
  const ids = (await vault.list(`${kvMount}/metadata/${kvPrefix}/`)).filter((name) => KEY_ID.test(name)).sort();
  const store = new VaultKeyStore(vault, paths);
  const summary: RewrapSummary = { latestVersion, records: ids.length, moved: 0, alreadyCurrent: 0, failed: 0, interrupted: false };
  options.progress(
    `${ids.length} key records under ${kvMount}/${kvPrefix}; moving each to ${transitKey} v${latestVersion}${options.dryRun ? ' (dry run)' : ''}`,
  );

  for (const [n, keyId] of ids.entries()) {
    if (options.stopping()) {
      summary.interrupted = true;
      break;
    }
    const at = `${n + 1}/${ids.length}`;
    try {
      const outcome = await moveOne(vault, store, paths, keyId, latestVersion, options.dryRun);
      if (outcome.moved) summary.moved++;
      else summary.alreadyCurrent++;
      options.progress(`${at} ${keyId} ${outcome.moved ? `v${outcome.from} -> v${latestVersion}` : `already v${outcome.from}`}`);
      if (outcome.moved && options.paceMs > 0) await new Promise((r) => setTimeout(r, options.paceMs));
    } catch (err) {
      summary.failed++;
      options.progress(`${at} ${keyId} FAILED: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return summary;
}

async function moveOne(
  vault: VaultAdapter,
  store: VaultKeyStore,
  paths: VaultPaths,
  keyId: string,
  latestVersion: number,
  dryRun: boolean,
): Promise<{ moved: boolean; from: number }> {
  const path = `${paths.kvMount}/data/${paths.kvPrefix}/${keyId}`;
  // A write that loses a check-and-set to another run is read again, once.
  for (let attempt = 1; ; attempt++) {
    const body = await vault.read(path);
    const record = body.data?.['data'] as KeyRecord | undefined;
    const kvVersion = Number((body.data?.['metadata'] as Record<string, unknown> | undefined)?.['version']);
    if (!record || typeof record.ciphertext !== 'string' || typeof record.context !== 'string' || !Number.isSafeInteger(kvVersion))
      throw new SignerError('invalid_request', 'not a key record');
    const from = ciphertextVersion(record.ciphertext);
    if (from >= latestVersion) return { moved: false, from };
    if (dryRun) return { moved: true, from };

    const rewrapped = await vault.write(`${paths.transitMount}/rewrap/${paths.transitKey}`, { ciphertext: record.ciphertext, context: record.context });
    const ciphertext = rewrapped.data?.['ciphertext'];
    if (typeof ciphertext !== 'string' || ciphertextVersion(ciphertext) !== latestVersion)
      throw new SignerError('vault_unavailable', `transit answered no ciphertext of v${latestVersion}`);
    await checkAddress(store, record, ciphertext);
    try {
      await vault.write(path, { options: { cas: kvVersion }, data: { ...record, ciphertext } });
      return { moved: true, from };
    } catch (err) {
      // 400: the record has a newer version than the one read (another run wrote it).
      if ((err as SignerError).code !== 'invalid_request' || attempt >= 2) throw err;
    }
  }
}

/** The new ciphertext decrypts to the key of the record's address; the key is zeroed here. */
async function checkAddress(store: VaultKeyStore, record: KeyRecord, ciphertext: string): Promise<void> {
  const secret = await store.decrypt(record.context, ciphertext);
  let address: string;
  try {
    address = addressOfPublicKey(secp256k1.getPublicKey(secret, false));
  } finally {
    secret.fill(0);
  }
  if (address !== record.address) throw new SignerError('internal', `the rewrapped ciphertext decrypts to another address (${address}): not written`);
}

/** The program: `node dist/keyvault/rewrap.js [--dry-run] [--pace-ms N]`; exit 0 done, 1 a record failed or the run was stopped, 2 usage. */
export async function runRewrap(argv: string[], env?: Readonly<Record<string, string | undefined>>): Promise<number> {
  let dryRun = false;
  let paceMs = 0;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--dry-run') dryRun = true;
    else if (a === '--pace-ms' && /^\d{1,6}$/.test(argv[i + 1] ?? '')) paceMs = Number(argv[++i]);
    else {
      process.stderr.write('usage: custody vault rewrap [--dry-run] [--pace-ms N]\n');
      return 2;
    }
  }
  let config: ReturnType<typeof loadRewrapConfig>;
  try {
    config = loadRewrapConfig(env);
  } catch (err) {
    if (err instanceof SignerConfigError) {
      process.stderr.write(`${err.message}\n`);
      return 2;
    }
    throw err;
  }
  // stdout carries the summary only.
  const log = createSignerLog(config.logLevel, pino.destination({ fd: 2, sync: true }));
  const vault = new VaultAdapter(config.vault, log);
  let stop = false;
  const onSignal = () => (stop = true);
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    const summary = await rewrapRecords(vault, config.vault.paths, {
      paceMs,
      dryRun,
      progress: (line) => process.stderr.write(`rewrap: ${line}\n`),
      stopping: () => stop,
    });
    process.stdout.write(`${JSON.stringify(summary)}\n`);
    const toMove = dryRun ? ` ${summary.moved} to move;` : '';
    process.stderr.write(
      `rewrap: ${summary.interrupted ? 'stopped' : 'done'}:${toMove} ${dryRun ? 0 : summary.moved} moved, ${summary.alreadyCurrent} already on v${summary.latestVersion}, ${summary.failed} failed` +
        `${summary.interrupted ? '; run it again to continue' : ''}\n`,
    );
    return summary.failed > 0 || summary.interrupted ? 1 : 0;
  } catch (err) {
    process.stderr.write(`rewrap: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  } finally {
    vault.close();
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  runRewrap(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`rewrap: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
