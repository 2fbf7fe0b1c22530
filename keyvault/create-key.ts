import { timingSafeEqual } from 'node:crypto';
import { generateKey, type GeneratedKey } from './eth.js';
import { SignerError } from './errors.js';
import { keyIdFor } from './key-id.js';
import type { KeyRecord, KeyStore } from './stores/types.js';

export interface CreatedKey {
  keyId: string;
  address: string;
  createdAt: string;
  /** False when the request id already had a key (a retry). */
  created: boolean;
}

const present = (r: KeyRecord, created: boolean): CreatedKey => ({ keyId: r.keyId, address: r.address, createdAt: r.createdAt, created });

/**
 * The invariant of SIGNER.md: no address leaves before its key is durably stored and verified.
 * generate → encrypt bound to the key id → decrypt back and compare → write once → zero → answer.
 */
export class KeyCreator {
  /** Concurrent requests for one key id share one creation (a retry storm costs one key). */
  readonly #inFlight = new Map<string, Promise<CreatedKey>>();

  constructor(
    private readonly store: KeyStore,
    private readonly generate: () => Promise<GeneratedKey> = () => Promise.resolve(generateKey()),
  ) {}

  create(requestId: string): Promise<CreatedKey> {
    const keyId = keyIdFor(requestId);
    const running = this.#inFlight.get(keyId);
    if (running) return running.then((k) => ({ ...k, created: false }));
    const work = this.#create(keyId, requestId).finally(() => this.#inFlight.delete(keyId));
    this.#inFlight.set(keyId, work);
    return work;
  }

  async #create(keyId: string, requestId: string): Promise<CreatedKey> {
    // No read first: a retried request id is rare, and the write-once store answers `exists` for
    // it (then its stored key is the answer), which saves a storage round trip on every new key.
    const key = await this.generate();
    let roundTrip: Uint8Array | undefined;
    try {
      const context = Buffer.from(keyId, 'utf8').toString('base64');
      const ciphertext = await this.store.encrypt(context, key.secret);
      roundTrip = await this.store.decrypt(context, ciphertext);
      if (roundTrip.length !== key.secret.length || !timingSafeEqual(roundTrip, key.secret)) {
        throw new SignerError('misconfigured', 'the key-encryption round trip did not return the secret; nothing was stored');
      }
      const record: KeyRecord = {
        keyId,
        address: key.address,
        publicKey: `0x${Buffer.from(key.publicKey).toString('hex')}`,
        ciphertext,
        transitKey: this.store.transitKeyName,
        context,
        createdAt: new Date().toISOString(),
        requestId,
      };
      if ((await this.store.putOnce(record)) === 'created') return present(record, true);
      // Another signer won the race for this key id: its key is the one.
      const winner = await this.store.get(keyId);
      if (!winner) throw new SignerError('vault_unavailable', 'the key record exists but could not be read back');
      return present(winner, false);
    } finally {
      key.secret.fill(0);
      roundTrip?.fill(0);
    }
  }

  async get(keyId: string): Promise<{ keyId: string; address: string; publicKey: string } | undefined> {
    const r = await this.store.get(keyId);
    return r && { keyId: r.keyId, address: r.address, publicKey: r.publicKey };
  }
}
