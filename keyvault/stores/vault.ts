import { SignerError } from '../errors.js';
import { DEPLOYMENT_ID, KEY_ID } from '../key-id.js';
import type { VaultAdapter, VaultBody } from '../vault/adapter.js';
import type { StoreHealth } from '../../contract/index.js';
import type { KeyRecord, KeyStore, StoredDocument } from './types.js';
import { checkDocumentPath } from './documents.js';
import { Batcher } from '../batcher.js';
import { encryptRequestBody, takePlaintexts } from '../vault/transit-bytes.js';
import type { ServiceKeyVersion } from '../service-key.js';

/** One answer per batch item: the named field, or an Error for an item Vault refused. */
function batchResults(body: VaultBody, count: number, field: 'ciphertext' | 'plaintext'): Array<string | Error> {
  const results = body.data?.['batch_results'];
  if (!Array.isArray(results) || results.length !== count) throw new SignerError('vault_unavailable', `transit answered no batch results for ${field}`);
  return results.map((r: unknown) => {
    const value = (r as Record<string, unknown> | null)?.[field];
    if (typeof value === 'string') return value;
    const error = (r as Record<string, unknown> | null)?.['error'];
    return new SignerError('invalid_request', `transit refused an item: ${typeof error === 'string' ? error : 'no result'}`);
  });
}

export interface VaultPaths {
  transitMount: string;
  transitKey: string;
  kvMount: string;
  kvPrefix: string;
  /** The service key (ecdsa-p256, not exportable): signs attestations and audit checkpoints only. */
  serviceKey: string;
}

/** What the transit key must read back as (keyvault/README.md startup checks). */
const REQUIRED_KEY = { type: 'aes256-gcm96', derived: true, exportable: false, allow_plaintext_backup: false, deletion_allowed: false };
/** What the service key must read back as: a P-256 signing key that can never leave Vault. */
const REQUIRED_SERVICE_KEY = { type: 'ecdsa-p256', exportable: false, allow_plaintext_backup: false, deletion_allowed: false };

/**
 * Transit is the key-encryption key; KV v2 holds the ciphertext, written once (`cas: 0`) under
 * a policy with `create` and `read` only.
 */
export class VaultKeyStore implements KeyStore {
  readonly backend = 'vault' as const;
  // Transit takes batches: concurrent creations share encrypt and decrypt round trips.
  readonly #encrypts: Batcher<{ context: string; plaintext: Uint8Array }, string>;
  readonly #decrypts: Batcher<{ context: string; ciphertext: string }, Buffer>;

  constructor(
    private readonly vault: VaultAdapter,
    private readonly paths: VaultPaths,
  ) {
    const { transitMount, transitKey } = paths;
    // Key bytes go out and come back as bytes (transit-bytes.ts): never a JavaScript string.
    this.#encrypts = new Batcher(async (items) => {
      const body = encryptRequestBody(items);
      try {
        const answer = await vault.postBytes(`${transitMount}/encrypt/${transitKey}`, body);
        return batchResults(JSON.parse(answer.toString('utf8')) as VaultBody, items.length, 'ciphertext');
      } finally {
        body.fill(0);
      }
    });
    this.#decrypts = new Batcher(async (items) => {
      const answer = await vault.postBytes(`${transitMount}/decrypt/${transitKey}`, Buffer.from(JSON.stringify({ batch_input: items }), 'utf8'));
      let plaintexts: Buffer[] = [];
      try {
        plaintexts = takePlaintexts(answer);
        const shape = batchResults(JSON.parse(answer.toString('utf8')) as VaultBody, items.length, 'plaintext');
        let next = 0;
        const results = shape.map((r) =>
          r instanceof Error ? r : (plaintexts[next++] ?? new SignerError('vault_unavailable', 'transit answered fewer plaintexts than results')),
        );
        if (next !== plaintexts.length) throw new SignerError('vault_unavailable', 'transit answered plaintexts out of shape');
        return results;
      } catch (err) {
        for (const p of plaintexts) p.fill(0);
        throw err;
      } finally {
        answer.fill(0);
      }
    });
  }

  get transitKeyName(): string {
    return this.paths.transitKey;
  }

  #kvPath(keyId: string): string {
    if (!KEY_ID.test(keyId)) throw new SignerError('invalid_request', 'not a key id');
    return `${this.paths.kvMount}/data/${this.paths.kvPrefix}/${keyId}`;
  }

  async check(): Promise<void> {
    const { transitMount, transitKey, kvMount } = this.paths;
    const health = await this.vault.health();
    if (!health.initialized) throw new SignerError('misconfigured', 'Vault is not initialised: run `vault operator init`');
    if (health.sealed) throw new SignerError('vault_sealed', 'Vault is sealed: unseal it (`vault operator unseal`) and start the signer again');
    await this.vault.login();

    let key: VaultBody;
    try {
      key = await this.vault.read(`${transitMount}/keys/${transitKey}`);
    } catch (err) {
      if ((err as SignerError).code === 'not_found' || (err as SignerError).code === 'invalid_request') {
        throw new SignerError(
          'misconfigured',
          `transit key "${transitKey}" not found on mount "${transitMount}": enable the transit engine there and run ` +
            `\`vault write ${transitMount}/keys/${transitKey} type=aes256-gcm96 derived=true\` (scripts/vault-setup.sh does this)`,
        );
      }
      throw err;
    }
    const data = key.data ?? {};
    const wrong = Object.entries(REQUIRED_KEY)
      .filter(([name, want]) => data[name] !== want)
      .map(([name, want]) => `${name} is ${JSON.stringify(data[name])}, must be ${JSON.stringify(want)}`);
    if (wrong.length > 0) {
      throw new SignerError(
        'misconfigured',
        `transit key "${transitMount}/keys/${transitKey}" is configured wrongly: ${wrong.join('; ')}. ` +
          'Keys cannot be changed to derived or back to non-exportable: create a new key with the settings of the operations guide and set VAULT_TRANSIT_KEY.',
      );
    }

    await this.#checkServiceKey();

    let mount: VaultBody;
    try {
      mount = await this.vault.read(`sys/internal/ui/mounts/${kvMount}`);
    } catch (err) {
      const code = (err as SignerError).code;
      if (code === 'not_found' || code === 'auth_failed' || code === 'invalid_request') {
        throw new SignerError(
          'misconfigured',
          `KV mount "${kvMount}" not found or not readable: enable it with \`vault secrets enable -path=${kvMount} kv-v2\``,
        );
      }
      throw err;
    }
    const options = mount.data?.['options'] as Record<string, unknown> | null | undefined;
    if (mount.data?.['type'] !== 'kv' || options?.['version'] !== '2') {
      throw new SignerError(
        'misconfigured',
        `mount "${kvMount}" is not a KV version 2 engine: enable one with \`vault secrets enable -path=${kvMount} kv-v2\``,
      );
    }
    await this.#checkKvRetention(kvMount);
  }

  /** The service key exists, signs ES256, and can never be exported, backed up in plain or deleted. */
  async #checkServiceKey(): Promise<void> {
    const { transitMount, serviceKey } = this.paths;
    let key: VaultBody;
    try {
      key = await this.vault.read(`${transitMount}/keys/${serviceKey}`);
    } catch (err) {
      if ((err as SignerError).code === 'not_found' || (err as SignerError).code === 'invalid_request') {
        throw new SignerError(
          'misconfigured',
          `service key "${serviceKey}" not found on mount "${transitMount}": run \`vault write ${transitMount}/keys/${serviceKey} type=ecdsa-p256 exportable=false\` (scripts/vault-setup.sh does this)`,
        );
      }
      throw err;
    }
    const data = key.data ?? {};
    const wrong = Object.entries(REQUIRED_SERVICE_KEY)
      .filter(([name, want]) => data[name] !== want)
      .map(([name, want]) => `${name} is ${JSON.stringify(data[name])}, must be ${JSON.stringify(want)}`);
    if (wrong.length > 0) {
      throw new SignerError(
        'misconfigured',
        `service key "${transitMount}/keys/${serviceKey}" is configured wrongly: ${wrong.join('; ')}. ` +
          'An exportable key cannot be made non-exportable again: create a new one with scripts/vault-setup.sh and set VAULT_SERVICE_KEY.',
      );
    }
  }

  /** Versions below `min_decryption_version` are retired (transit verifies none of them either); those below `min_available_version` are gone. */
  async serviceVersions(): Promise<{ latest: number; versions: ServiceKeyVersion[] }> {
    const key = await this.vault.read(`${this.paths.transitMount}/keys/${this.paths.serviceKey}`);
    const data = key.data ?? {};
    const latest = Number(data['latest_version'] ?? 0);
    const retiredBelow = Math.max(1, Number(data['min_decryption_version'] ?? 1));
    const keys = (data['keys'] ?? {}) as Record<string, { public_key?: unknown } | undefined>;
    const versions: ServiceKeyVersion[] = [];
    for (const [n, v] of Object.entries(keys)) {
      const version = Number(n);
      if (Number.isSafeInteger(version) && version >= retiredBelow && typeof v?.public_key === 'string')
        versions.push({ version, publicKey: { pem: v.public_key } });
    }
    return { latest, versions };
  }

  /** `marshaling_algorithm=jws`: transit answers r‖s base64url-encoded, as JWS wants it. */
  async serviceSignRaw(version: number, signingInput: Buffer): Promise<Buffer> {
    const answer = await this.vault.write(`${this.paths.transitMount}/sign/${this.paths.serviceKey}`, {
      input: signingInput.toString('base64'),
      hash_algorithm: 'sha2-256',
      marshaling_algorithm: 'jws',
      key_version: version,
    });
    const signature = answer.data?.['signature'];
    const m = typeof signature === 'string' ? /^vault:v(\d+):([A-Za-z0-9_-]+)$/.exec(signature) : null;
    if (!m || Number(m[1]) !== version) throw new SignerError('vault_unavailable', 'transit answered no signature of the asked version');
    return Buffer.from(m[2] ?? '', 'base64url');
  }

  /** A key record is the only copy of its key: no setting of the mount may ever delete or destroy one of its versions. */
  async #checkKvRetention(kvMount: string): Promise<void> {
    let config: VaultBody;
    try {
      config = await this.vault.read(`${kvMount}/config`);
    } catch (err) {
      const code = (err as SignerError).code;
      if (code === 'not_found' || code === 'auth_failed' || code === 'invalid_request') {
        throw new SignerError(
          'misconfigured',
          `cannot read "${kvMount}/config" to check that key records are kept: grant the signer's policy \`read\` on it (scripts/vault-setup.sh does)`,
        );
      }
      throw err;
    }
    const maxVersions = Number(config.data?.['max_versions'] ?? 0);
    const raw = config.data?.['delete_version_after'];
    const deleteAfter = typeof raw === 'string' ? raw : '0s';
    const wrong: string[] = [];
    if (maxVersions !== 0) wrong.push(`max_versions is ${maxVersions} (a limit destroys the oldest versions of a record once it has that many; must be 0)`);
    if (!/^0[a-z]*$/.test(deleteAfter)) wrong.push(`delete_version_after is ${deleteAfter} (records would be deleted after that time; must be 0s)`);
    if (wrong.length > 0) {
      throw new SignerError(
        'misconfigured',
        `KV mount "${kvMount}" could drop key records: ${wrong.join('; ')}. Use a dedicated mount: \`vault write ${kvMount}/config max_versions=0 delete_version_after=0s\``,
      );
    }
  }

  async health(): Promise<StoreHealth> {
    const h = await this.vault.health();
    const out: StoreHealth = { backend: 'vault', ok: h.initialized && !h.sealed, ...h };
    if (this.vault.credentialExpiresAt !== undefined) out.credentialExpiresAt = this.vault.credentialExpiresAt;
    if (out.ok) {
      const key = await this.vault.read(`${this.paths.transitMount}/keys/${this.paths.transitKey}`);
      out.transitKey = {
        name: this.paths.transitKey,
        latestVersion: Number(key.data?.['latest_version'] ?? 0),
        minDecryptionVersion: Number(key.data?.['min_decryption_version'] ?? 0),
      };
    }
    return out;
  }

  encrypt(context: string, secret: Uint8Array): Promise<string> {
    return this.#encrypts.add({ context, plaintext: secret });
  }

  /** The key bytes in a Buffer the caller zeroes (create-key.ts does, in `finally`). */
  decrypt(context: string, ciphertext: string): Promise<Uint8Array> {
    return this.#decrypts.add({ context, ciphertext });
  }

  /**
   * `cas: 0` writes only if nothing is there. An existing path answers 403 (no `update` in the
   * policy) or 400 (CAS mismatch): either means "already stored" if `stored()` finds it;
   * otherwise it is a real refusal.
   */
  async #writeOnce(path: string, data: object, stored: () => Promise<unknown>): Promise<'created' | 'exists'> {
    try {
      await this.vault.write(path, { options: { cas: 0 }, data });
      return 'created';
    } catch (err) {
      const code = (err as SignerError).code;
      if ((code === 'invalid_request' || code === 'auth_failed') && (await stored()) !== undefined) return 'exists';
      throw err;
    }
  }

  putOnce(record: KeyRecord): Promise<'created' | 'exists'> {
    return this.#writeOnce(this.#kvPath(record.keyId), record, () => this.get(record.keyId));
  }

  async get(keyId: string): Promise<KeyRecord | undefined> {
    try {
      const body = await this.vault.read(this.#kvPath(keyId));
      const data = (body.data?.['data'] ?? undefined) as KeyRecord | undefined;
      return data && typeof data.address === 'string' ? data : undefined;
    } catch (err) {
      if ((err as SignerError).code === 'not_found') return undefined;
      throw err;
    }
  }

  /** Documents are written once like the keys, under the same prefix and policy. */
  async putDocumentOnce(document: StoredDocument): Promise<'created' | 'exists'> {
    const at = `${this.paths.kvMount}/data/${this.paths.kvPrefix}/${checkDocumentPath(document.path, 'write')}`;
    return this.#writeOnce(at, document, () => this.getDocument(document.path));
  }

  async getDocument(path: string): Promise<StoredDocument | undefined> {
    try {
      const body = await this.vault.read(`${this.paths.kvMount}/data/${this.paths.kvPrefix}/${checkDocumentPath(path, 'read')}`);
      const data = (body.data?.['data'] ?? undefined) as StoredDocument | undefined;
      return data && data.path === path && typeof data.body === 'object' ? data : undefined;
    } catch (err) {
      if ((err as SignerError).code === 'not_found') return undefined;
      throw err;
    }
  }

  /**
   * The marker is one more write-once record beside the keys (`<prefix>/deployment`, `cas: 0`):
   * the signer's policy (create and read under the prefix) already allows it and forbids changing it.
   */
  async claimOwner(deploymentId: string): Promise<string> {
    const markerPath = `${this.paths.kvMount}/data/${this.paths.kvPrefix}/deployment`;
    const read = async (): Promise<string | undefined> => {
      try {
        const owner = (await this.vault.read(markerPath)).data?.['data'] as Record<string, unknown> | undefined;
        return typeof owner?.['deploymentId'] === 'string' ? owner['deploymentId'] : undefined;
      } catch (err) {
        if ((err as SignerError).code === 'not_found') return undefined;
        throw err;
      }
    };
    let owner = await read();
    if (owner === undefined) {
      try {
        await this.vault.write(markerPath, { options: { cas: 0 }, data: { deploymentId, createdAt: new Date().toISOString() } });
        return deploymentId;
      } catch (err) {
        const code = (err as SignerError).code;
        if (code !== 'invalid_request' && code !== 'auth_failed') throw err;
        owner = await read();
      }
    }
    if (owner === undefined || !DEPLOYMENT_ID.test(owner)) {
      throw new SignerError('misconfigured', `${markerPath} exists but does not hold a deployment id`);
    }
    return owner;
  }

  close(): void {
    this.vault.close();
  }
}
