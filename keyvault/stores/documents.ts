import { SignerError } from '../errors.js';
import { KEY_ID } from '../key-id.js';

/** Where each kind of write-once document lives in a store (beside the keys, under the same prefix). */
const DOCUMENT_PATH = /^(bindings\/[0-9a-f-]{36}|(policies|owners)\/[1-9][0-9]{0,18}\/v[1-9][0-9]{0,8})$/;

export const bindingPath = (keyId: string): string => {
  if (!KEY_ID.test(keyId)) throw new SignerError('invalid_request', 'not a key id');
  return `bindings/${keyId}`;
};
export const policyPath = (projectId: string, version: number): string => `policies/${projectId}/v${version}`;
export const ownersPath = (projectId: string, version: number): string => `owners/${projectId}/v${version}`;

/** Refuses a path that is not one of the documents' (a key id, the deployment marker, anything else). */
export function checkDocumentPath(path: string): string {
  if (!DOCUMENT_PATH.test(path)) throw new SignerError('invalid_request', 'not a document path');
  return path;
}
