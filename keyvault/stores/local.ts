import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { link, readFile, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { SignerError } from '../errors.js';
import { KEY_ID } from '../key-id.js';
import type { KeyRecord, KeyStore, StoreHealth } from './types.js';

/**
 * The development key store (SIGNER.md "local"): the same flow as Vault with AES-256-GCM under
 * a master key file (0600) standing in for transit, and one write-once file per key standing in
 * for KV v2. Refused in production by config.
 */
export class LocalKeyStore implements KeyStore {
  readonly backend = 'local' as const;
  readonly transitKeyName = 'local-master-key';
  readonly #keysDir: string;
  readonly #master: Buffer;

  constructor(dir: string) {
    this.#keysDir = path.join(dir, 'keys');
    mkdirSync(this.#keysDir, { recursive: true, mode: 0o700 });
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
  }

  check(): Promise<void> {
    return Promise.resolve();
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
    return Promise.resolve(new Uint8Array(Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()])));
  }

  #file(keyId: string): string {
    if (!KEY_ID.test(keyId)) throw new SignerError('invalid_request', 'not a key id');
    return path.join(this.#keysDir, `${keyId}.json`);
  }

  /**
   * Written to a temporary file and flushed to disk, then hard-linked into place: link() never
   * overwrites, so the first writer wins and a crash never leaves a half-written record.
   */
  async putOnce(record: KeyRecord): Promise<'created' | 'exists'> {
    const target = this.#file(record.keyId);
    const tmp = `${target}.${randomBytes(6).toString('hex')}.tmp`;
    await writeFile(tmp, JSON.stringify(record), { mode: 0o600, flag: 'wx', flush: true });
    try {
      await link(tmp, target);
      return 'created';
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return 'exists';
      throw err;
    } finally {
      await unlink(tmp).catch(() => undefined);
    }
  }

  async get(keyId: string): Promise<KeyRecord | undefined> {
    try {
      return JSON.parse(await readFile(this.#file(keyId), 'utf8')) as KeyRecord;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  close(): void {
    this.#master.fill(0);
  }
}
