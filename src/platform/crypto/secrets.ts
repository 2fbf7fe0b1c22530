import { createCipheriv, createDecipheriv, createHmac, hash, randomBytes, timingSafeEqual } from 'node:crypto';

/** A new high-entropy secret: a prefix that says what it is, then 32 random bytes, base64url. */
export const newSecret = (prefix: string): string => `${prefix}${randomBytes(32).toString('base64url')}`;

/**
 * SHA-256 is enough to store secrets of 256 bits of entropy (docs/interface.md section 1). One-shot
 * `crypto.hash` (Node >= 20.12): it runs on every request with a key or token, and is about
 * 40% cheaper than a createHash object.
 */
export const hashSecret = (secret: string | Buffer): Buffer => hash('sha256', secret, 'buffer');

export function constantTimeEqual(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

export const hmacSha256 = (key: Buffer, data: string): Buffer => createHmac('sha256', key).update(data, 'utf8').digest();

/** Thrown when a sealed value names a data key this process does not hold. */
export class UnknownDataKeyError extends Error {
  constructor(readonly keyId: string) {
    super(`sealed under data key ${keyId}, which this process does not hold: add it to DATA_DECRYPTION_KEYS`);
  }
}

/** A data key's public name: a short hash, so a sealed value says which key opens it without revealing the key. */
export const dataKeyId = (key: Buffer): string =>
  hash('sha256', Buffer.concat([Buffer.from('custody:data-key-id:v1\n'), key]), 'buffer')
    .subarray(0, 6)
    .toString('base64url');

/**
 * AES-256-GCM for secrets the service must read back in clear (webhook signing secrets, stored
 * answers), under a keyring: values are sealed under the current key and opened under any key the
 * process holds, so the key rotates in place (docs/operations.md, "Rotating the data encryption key").
 * Format: `v2.<key id>.<iv>.<ciphertext>.<tag>` in base64url; `v1.<iv>.<ciphertext>.<tag>` (before
 * key ids) is still opened, under whichever held key authenticates it.
 */
export class SecretBox {
  readonly #current: { id: string; key: Buffer };
  readonly #keys: Map<string, Buffer>;

  constructor(current: Buffer, decryptOnly: readonly Buffer[] = []) {
    for (const key of [current, ...decryptOnly]) if (key.length !== 32) throw new Error('SecretBox needs 32-byte keys');
    this.#current = { id: dataKeyId(current), key: current };
    this.#keys = new Map([current, ...decryptOnly].map((k) => [dataKeyId(k), k]));
    if (this.#keys.size !== decryptOnly.length + 1) throw new Error('the same data key is given twice');
  }

  /** The id of the key new values are sealed under. */
  get currentKeyId(): string {
    return this.#current.id;
  }

  /** Keys for the HMAC of list cursors: the current key's first (it makes new cursors), every key's accepted. */
  cursorKeys(): Buffer[] {
    return [this.#current.key, ...[...this.#keys.values()].filter((k) => k !== this.#current.key)].map((k) => hmacSha256(k, 'custody:cursor-key:v1'));
  }

  seal(plaintext: string, aad: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.#current.key, iv);
    cipher.setAAD(Buffer.from(aad, 'utf8'));
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return ['v2', this.#current.id, iv.toString('base64url'), ct.toString('base64url'), cipher.getAuthTag().toString('base64url')].join('.');
  }

  open(sealed: string, aad: string): string {
    const parts = sealed.split('.');
    if (parts[0] === 'v2' && parts.length === 5) {
      const [, id = '', iv = '', ct = '', tag = ''] = parts;
      const key = this.#keys.get(id);
      if (key === undefined) throw new UnknownDataKeyError(id);
      return SecretBox.#decrypt(key, iv, ct, tag, aad);
    }
    if (parts[0] === 'v1' && parts.length === 4) {
      const [, iv = '', ct = '', tag = ''] = parts;
      // No key id: the key whose tag verifies is the one (GCM's tag fails under any other).
      for (const key of this.#keys.values()) {
        try {
          return SecretBox.#decrypt(key, iv, ct, tag, aad);
        } catch {
          continue;
        }
      }
      throw new UnknownDataKeyError('v1');
    }
    throw new Error('unknown sealed secret format');
  }

  /** Whether `sealed` is under the current key already (the re-encryption job skips it). */
  isCurrent(sealed: string): boolean {
    return sealed.startsWith(`v2.${this.#current.id}.`);
  }

  static #decrypt(key: Buffer, iv: string, ct: string, tag: string, aad: string): string {
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
    decipher.setAAD(Buffer.from(aad, 'utf8'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
  }
}
