/**
 * Key ids are chosen by the caller at random (UUIDv4, SIGNER.md "Creating a key"); keys made by
 * earlier releases carry the UUIDv5 ids they were stored under and stay readable.
 */
export const KEY_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[45][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** What a new key may be created under: a random UUIDv4 only, never an id derived from anything. */
export const NEW_KEY_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** A deployment id (the API's random id of its database): a UUID of any version. */
export const DEPLOYMENT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
