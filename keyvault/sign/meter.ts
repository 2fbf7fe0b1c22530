import { keccak_256 } from '@noble/hashes/sha3.js';
import { LIMITS } from '../limits.js';
import { refuse } from './input.js';

/** Keccak-256 absorbs 136 bytes per permutation: the unit of hashing work. */
const KECCAK_RATE = 136;

/**
 * Thrown by a reading on the main thread that would cost more than its share
 * (LIMITS.inline.work): the operation is read again by a worker thread (keyvault/read-pool.ts).
 * Not a refusal: the caller never sees it.
 */
export class Deferred extends Error {
  constructor() {
    super('read on a worker thread');
    this.name = 'Deferred';
  }
}

/**
 * The work one operation's reading does, counted before it is done: a unit per value read and
 * per keccak block. With a budget (the main thread's), the reading stops past it (Deferred);
 * every reading stops at LIMITS.hashedBytes, a refusal naming the field that crossed it.
 */
export class Meter {
  #units = 0;
  #hashed = 0;

  constructor(readonly budget = Number.POSITIVE_INFINITY) {}

  /** The main thread's meter. */
  static inline(): Meter {
    return new Meter(LIMITS.inline.work);
  }

  get units(): number {
    return this.#units;
  }

  spend(units: number): void {
    this.#units += units;
    if (this.#units > this.budget) throw new Deferred();
  }

  /** Bytes about to be hashed (or assembled to be): counted, and refused past the limit, before the work. */
  hashing(bytes: number, path: string): void {
    this.#hashed += bytes;
    if (this.#hashed > LIMITS.hashedBytes) refuse(path, `takes the operation past ${LIMITS.hashedBytes} bytes hashed`);
    this.spend(1 + Math.floor(bytes / KECCAK_RATE));
  }

  keccak(data: Uint8Array, path: string): Uint8Array {
    this.hashing(data.length, path);
    return keccak_256(data);
  }
}
