import { createCipheriv, createDecipheriv, createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { SignerError } from '../errors.js';
import { DEPLOYMENT_ID, KEY_ID } from '../key-id.js';
import { checkDocumentPath } from './documents.js';
import { RecordLog } from './local-log.js';
import type { StoreHealth } from '../../contract/index.js';
import type { KeyRecord, KeyStore, StoredDocument } from './types.js';
import type { ServiceKeyVersion } from '../service-key.js';

/** Makes a new directory entry durable. */
function fsyncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * The development key store (keyvault/README.md): the same flow as Vault with AES-256-GCM under
 * a master key file (0600) standing in for transit, and a write-once, group-committed record
 * log standing in for KV v2. Refused in production by config.
 */
export class LocalKeyStore implements KeyStore {
  readonly backend = 'local' as const;
  readonly transitKeyName = 'local-master-key';
  readonly #master: Buffer;
  readonly #log: RecordLog<KeyRecord>;
  /** Write-once documents beside the keys (bindings, policy versions), under the keys' lock. */
  readonly #documents: RecordLog<StoredDocument>;
  readonly #ownerFile: string;
  /** The service key: P-256, a PKCS#8 file (0600) beside the master key, made once; one version. */
  readonly #serviceKey: KeyObject;

  /** `lockWaitMs`: how long to wait for a previous signer on this directory to exit (a restart). */
  constructor(
    dir: string,
    private readonly lockWaitMs = 15_000,
  ) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.#log = new RecordLog<KeyRecord>(path.join(dir, 'keys.log'), (r) => r.keyId, {
      lockFile: path.join(dir, 'keys.lock'),
      legacyDir: path.join(dir, 'keys'),
    });
    this.#documents = new RecordLog<StoredDocument>(path.join(dir, 'documents.log'), (d) => d.path);
    this.#ownerFile = path.join(dir, 'deployment');
    const masterFile = path.join(dir, 'master.key');
    if (!existsSync(masterFile)) {
      try {
        writeFileSync(masterFile, randomBytes(32).toString('base64'), { mode: 0o600, flag: 'wx' });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
    }
    this.#master = Buffer.from(readFileSync(masterFile, 'utf8').trim(), 'base64');
    if (this.#master.length !== 32) throw new SignerError('misconfigured', `${masterFile} does not hold a 32-byte base64 key`);
    const serviceFile = path.join(dir, 'service-key.pem');
    if (!existsSync(serviceFile)) {
      const pem = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' });
      try {
        writeFileSync(serviceFile, pem, { mode: 0o600, flag: 'wx' });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
    }
    this.#serviceKey = createPrivateKey(readFileSync(serviceFile, 'utf8'));
    if (this.#serviceKey.asymmetricKeyType !== 'ec' || this.#serviceKey.asymmetricKeyDetails?.namedCurve !== 'prime256v1')
      throw new SignerError('misconfigured', `${serviceFile} does not hold a P-256 key`);
  }

  serviceVersions(): Promise<{ latest: number; versions: ServiceKeyVersion[] }> {
    const pem = createPublicKey(this.#serviceKey).export({ format: 'pem', type: 'spki' }).toString();
    return Promise.resolve({ latest: 1, versions: [{ version: 1, publicKey: { pem } }] });
  }

  serviceSignRaw(version: number, signingInput: Buffer): Promise<Buffer> {
    if (version !== 1) return Promise.reject(new SignerError('invalid_request', 'the local service key has one version'));
    return Promise.resolve(sign('sha256', signingInput, { key: this.#serviceKey, dsaEncoding: 'ieee-p1363' }));
  }

  /** Takes the store's lock (one signer per directory) and loads its records. */
  async check(): Promise<void> {
    await this.#log.open(this.lockWaitMs);
    await this.#documents.open(0);
  }

  health(): Promise<StoreHealth> {
    return Promise.resolve({ backend: 'local', ok: true });
  }

  encrypt(context: string, secret: Uint8Array): Promise<string> {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.#master, iv);
    cipher.setAAD(Buffer.from(context, 'utf8'));
    const ct = Buffer.concat([cipher.update(secret), cipher.final()]);
    return Promise.resolve(`local:v1:${Buffer.concat([iv, ct, cipher.getAuthTag()]).toString('base64')}`);
  }

  decrypt(context: string, ciphertext: string): Promise<Uint8Array> {
    const raw = Buffer.from(ciphertext.replace(/^local:v1:/, ''), 'base64');
    const decipher = createDecipheriv('aes-256-gcm', this.#master, raw.subarray(0, 12));
    decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(raw.subarray(raw.length - 16));
    // In process: no round trip for batching to save. The one copy handed out is zeroed by the
    // caller; the decipher's own output buffers are zeroed here.
    const head = decipher.update(raw.subarray(12, raw.length - 16));
    const tail = decipher.final();
    const secret = new Uint8Array(head.length + tail.length);
    secret.set(head);
    secret.set(tail, head.length);
    head.fill(0);
    tail.fill(0);
    return Promise.resolve(secret);
  }

  /** Write-once, durable before `created`: group-committed to one append-only file (see RecordLog). */
  putOnce(record: KeyRecord): Promise<'created' | 'exists'> {
    if (!KEY_ID.test(record.keyId)) return Promise.reject(new SignerError('invalid_request', 'not a key id'));
    return this.#log.putOnce(record);
  }

  get(keyId: string): Promise<KeyRecord | undefined> {
    if (!KEY_ID.test(keyId)) return Promise.reject(new SignerError('invalid_request', 'not a key id'));
    return Promise.resolve(this.#log.get(keyId));
  }

  // async: a refused path is a rejected promise, as the Vault store's is.
  async putDocumentOnce(document: StoredDocument): Promise<'created' | 'exists'> {
    checkDocumentPath(document.path, 'write');
    return this.#documents.putOnce(document);
  }

  getDocument(documentPath: string): Promise<StoredDocument | undefined> {
    // A refused path (thrown in the executor) is a rejected promise.
    return new Promise((resolve) => resolve(this.#documents.get(checkDocumentPath(documentPath, 'read'))));
  }

  /** The marker is a file created exclusively (`wx`): the first deployment to claim the directory owns it. */
  claimOwner(deploymentId: string): Promise<string> {
    return new Promise((resolve) => {
      try {
        writeFileSync(this.#ownerFile, `${deploymentId}\n`, { mode: 0o600, flag: 'wx' });
        fsyncDir(path.dirname(this.#ownerFile));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const owner = readFileSync(this.#ownerFile, 'utf8').trim();
      if (!DEPLOYMENT_ID.test(owner)) throw new SignerError('misconfigured', `${this.#ownerFile} does not hold a deployment id`);
      resolve(owner);
    });
  }

  close(): void {
    this.#master.fill(0);
    void this.#log.close();
    void this.#documents.close();
  }
}
