/**
 * The size bounds both sides hold: the signer decides (keyvault/limits.ts holds these with its
 * own), the API refuses early what the signer would refuse and describes them in its schemas.
 */
const KIB = 1024;

/** Request bodies the signer reads, per kind of route; `413 too_large` at the first byte past one. */
export const SIGNER_BODY_BYTES = {
  /** Key creation, deployment binding, carry-over of documents: a few ids. */
  small: 4 * KIB,
  /** A carry-over of keys: up to CARRY_KEYS_MAX key ids. */
  carryKeys: 16 * KIB,
  /** A signing or evaluate request: the envelope and one operation (calldata at its limit is twice its bytes as hex). */
  operation: 320 * KIB,
  /** A policy or owner-list write, plain or signed. */
  document: 320 * KIB,
} as const;

/** A policy document's bounds. */
export const POLICY_BOUNDS = {
  rules: 100,
  /** Printable characters of a rule's name. */
  ruleNameChars: 100,
  conditionsPerRule: 16,
  /** Values of one `in` / `not_in` list. */
  valuesPerList: 1000,
  /** Condition values over the whole policy. */
  values: 10_000,
  textChars: 1024,
  limits: 16,
  /** The largest `count` of a limit. */
  limitCount: 1_000_000_000,
} as const;

/** Policy owners' keys a project may have. */
export const OWNER_KEYS_MAX = 10;

/** Keys one carry-over request binds at most (the API sends its records in batches of this size). */
export const CARRY_KEYS_MAX = 200;
