import { SignerError } from './errors.js';

/**
 * Key ids are chosen by the caller at random (UUIDv4, keyvault/README.md); keys made by
 * earlier releases carry the UUIDv5 ids they were stored under and stay readable.
 */
export const KEY_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[45][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** What a new key may be created under: a random UUIDv4 only, never an id derived from anything. */
export const NEW_KEY_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** A deployment id (the API's random id of its database): a UUID of any version. */
export const DEPLOYMENT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/**
 * A project as the signer knows it: the API's random identity of the project (a lower-case
 * UUIDv4, never reused), never its database id, which a sequence hands out again after a restore.
 */
export const PROJECT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The database id earlier releases named projects by: read only to carry their documents over. */
export const LEGACY_PROJECT_ID = /^[1-9][0-9]{0,18}$/;

/**
 * A project id where the signer expects one: the identity only. A database id (a number, or its
 * digits as a string) is refused by name, so that a caller still sending one learns why.
 */
export function projectIdOf(v: unknown, path: string): string {
  if (typeof v === 'string' && PROJECT_ID.test(v)) return v;
  if (typeof v === 'number' || (typeof v === 'string' && /^[0-9]+$/.test(v)))
    throw new SignerError('invalid_request', `${path} is a numeric project id: name the project by its identity (its random lower-case UUIDv4)`);
  throw new SignerError('invalid_request', `${path} must be a project identity (a random lower-case UUIDv4)`);
}

/** The database id of a project of an earlier release, where the carry-over names one (as a string). */
export function legacyProjectIdOf(v: unknown, path: string): string {
  if (typeof v !== 'string' || !LEGACY_PROJECT_ID.test(v))
    throw new SignerError('invalid_request', `${path} must be the project's database id of an earlier release, as a string`);
  return v;
}
