import { OWNER_KEYS_MAX, POLICY_BOUNDS, SIGNER_BODY_BYTES } from '../contract/index.js';

/**
 * The size and shape of everything the signer reads, in one place (docs/signing.md lists them and
 * says which real requests they were measured against). Each is checked while reading, before the
 * work it bounds: a request past one is refused at the first overflow, never read in full first.
 * Those the API holds too (bodies, policy documents, owners) are the contract's (contract/bounds.ts);
 * the signer's checks are the ones that decide.
 */
const KIB = 1024;

export const LIMITS = {
  body: SIGNER_BODY_BYTES,
  /** `personal_sign`: the bytes signed. */
  messageBytes: 16 * KIB,
  transaction: {
    /** Calldata or init code: EIP-3860 caps init code at 48 KiB; geth's pool refuses transactions over 128 KiB. */
    dataBytes: 128 * KIB,
    accessListAddresses: 256,
    /** Storage keys over the whole access list. */
    storageKeys: 1024,
  },
  typedData: {
    /** Struct types, EIP712Domain included. */
    types: 32,
    fieldsPerType: 64,
    /** Structs and arrays inside one another. */
    depth: 16,
    arrayLength: 1024,
    /** Values encoded (leaves, arrays and structs, domain included): what bounds the hashing. */
    values: 8192,
    /** A `string` leaf, as UTF-8. */
    stringBytes: 16 * KIB,
    /** A `bytes` leaf (a Safe transaction's calldata, for one). */
    bytesBytes: 128 * KIB,
  },
  policy: POLICY_BOUNDS,
  owners: OWNER_KEYS_MAX,
  /**
   * Bytes one operation hashes, in all: its text and bytes, 32 per value of a typed-data struct or
   * array, the type encodings. Above what any request within the limits above really needs.
   */
  hashedBytes: 1024 * KIB,
  /** Refusals: how many unknown names one lists, and how long an answer's message may be. */
  refusal: { names: 5, messageChars: 1024 },
  /**
   * What the main thread reads itself: a body up to `bodyBytes`, whose reading costs at most
   * `work` units (a value read, or a keccak block of 136 bytes, each about 3-10 µs on the machines
   * measured); anything more is read by the worker threads (keyvault/read-pool.ts).
   */
  inline: { bodyBytes: 16 * KIB, work: 128 },
  /** Operations waiting for a reading thread; past it a request is answered 503 `busy`. */
  queue: 64,
} as const;
