import { timingSafeEqual } from 'node:crypto';
import { generateKey, type GeneratedKey } from './eth.js';
import { SignerError } from './errors.js';
import { projectIdOf } from './key-id.js';
import { recordedProject } from './key-project.js';
import type { KeyRecord, KeyStore } from './stores/types.js';

export interface CreatedKey {
  keyId: string;
  address: string;
  createdAt: string;
  /** False when the request id already had a key (a retry). */
  created: boolean;
}

const conflict = (keyId: string) => new SignerError('key_conflict', `key id ${keyId} already holds the key of another request`);

const present = (r: KeyRecord, created: boolean): CreatedKey => ({ keyId: r.keyId, address: r.address, createdAt: r.createdAt, created });

/**
 * The invariant of keyvault/README.md: no address leaves before its key is durably stored and verified.
 * generate → encrypt bound to the key id → decrypt back and compare → write once → zero → answer.
 */
export class KeyCreator {
  /** Concurrent requests for one key id share one creation (a retry storm costs one key). */
  readonly #inFlight = new Map<string, { requestId: string; projectId: string; work: Promise<CreatedKey> }>();
  /** The deployment the store belongs to, once its marker has been read or written. */
  #owner: Promise<string> | undefined;

  constructor(
    private readonly store: KeyStore,
    private readonly generate: () => Promise<GeneratedKey> = () => Promise.resolve(generateKey()),
  ) {}

  /**
   * Binds this signer to the deployment that owns its store (the write-once marker, keyvault/README.md):
   * the first deployment to ask claims an unclaimed store; any other is refused, by name.
   */
  async bind(deploymentId: string): Promise<void> {
    if (!this.#owner) {
      this.#owner = this.store.claimOwner(deploymentId);
      this.#owner.catch(() => {
        this.#owner = undefined;
      });
    }
    const owner = await this.#owner;
    if (owner !== deploymentId) {
      throw new SignerError(
        'store_owned',
        `this key store belongs to deployment ${owner}, not to deployment ${deploymentId}: give each deployment a store (KV prefix or data directory) of its own`,
      );
    }
  }

  /**
   * The key for `keyId`, made for `requestId` and for the project `projectId` (its identity), which
   * is stored with it: the same pair again is the same key, another request id a conflict. A key
   * is never made without a project: nothing later may decide which project it signs for.
   */
  async create(keyId: string, requestId: string, deploymentId: string, projectId: string | undefined): Promise<CreatedKey> {
    if (projectId === undefined) throw new SignerError('project_required', 'a key is created for a project: name it by its identity (projectId)');
    // The server has read it already; a caller in process is held to the same rule.
    projectIdOf(projectId, 'projectId');
    await this.bind(deploymentId);
    const running = this.#inFlight.get(keyId);
    if (running) {
      if (running.requestId !== requestId || running.projectId !== projectId) throw conflict(keyId);
      return running.work.then((k) => ({ ...k, created: false }));
    }
    const work = this.#create(keyId, requestId, projectId).finally(() => this.#inFlight.delete(keyId));
    this.#inFlight.set(keyId, { requestId, projectId, work });
    return work;
  }

  async #create(keyId: string, requestId: string, projectId: string): Promise<CreatedKey> {
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
        projectId,
      };
      if ((await this.store.putOnce(record)) === 'created') return present(record, true);
      // Stored already: a retry of the same request (another signer won the race, or an earlier
      // attempt's answer was lost) gets that key; any other request id is a conflict.
      const winner = await this.store.get(keyId);
      if (!winner) throw new SignerError('vault_unavailable', 'the key record exists but could not be read back');
      if (winner.requestId !== requestId) throw conflict(keyId);
      // The same request for another project is no retry. A record of an earlier release (a
      // database id, or no project) is answered: the carry-over binds it from the API's records.
      const recorded = recordedProject(winner);
      if (recorded !== undefined && recorded !== projectId) throw conflict(keyId);
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
