import { createCipheriv, createDecipheriv, createHmac, hash, randomBytes, timingSafeEqual } from 'node:crypto';

/** A new high-entropy secret: a prefix that says what it is, then 32 random bytes, base64url. */
export const newSecret = (prefix: string): string => `${prefix}${randomBytes(32).toString('base64url')}`;

/**
 * SHA-256 is enough to store secrets of 256 bits of entropy (docs/interface.md section 1). One-shot
 * `crypto.hash` (Node >= 20.12): it runs on every request with a key or token, and is about
 * 40% cheaper than a createHash object.
 */
export const hashSecret = (secret: string): Buffer => hash('sha256', secret, 'buffer');

export function constantTimeEqual(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

export const hmacSha256 = (key: Buffer, data: string): Buffer => createHmac('sha256', key).update(data, 'utf8').digest();

/**
 * AES-256-GCM for secrets the service must read back in clear (webhook signing secrets).
 * Format: `v1.<iv>.<ciphertext>.<tag>` in base64url, so a future key version can be told apart.
 */
export class SecretBox {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('SecretBox needs a 32-byte key');
    this.#key = key;
  }

  seal(plaintext: string, aad: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    cipher.setAAD(Buffer.from(aad, 'utf8'));
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return ['v1', iv, ct, cipher.getAuthTag()].map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.');
  }

  open(sealed: string, aad: string): string {
    const [version, iv, ct, tag] = sealed.split('.');
    if (version !== 'v1' || iv === undefined || ct === undefined || tag === undefined) {
      throw new Error('unknown sealed secret format');
    }
    const decipher = createDecipheriv('aes-256-gcm', this.#key, Buffer.from(iv, 'base64url'));
    decipher.setAAD(Buffer.from(aad, 'utf8'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
  }
}
