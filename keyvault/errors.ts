import type { SignerErrorCode } from '../contract/index.js';

/** Each code's status (the codes are the contract's). */
const STATUS: Record<SignerErrorCode, number> = {
  vault_sealed: 503,
  vault_unavailable: 503,
  auth_failed: 502,
  misconfigured: 500,
  invalid_request: 400,
  // A signing operation the signer cannot read as its method defines it (the message names the field).
  invalid_operation: 400,
  invalid_policy: 400,
  // A policy written over a base version that is no longer the newest.
  policy_conflict: 409,
  // The project's policy does not allow the operation (the answer names the rule, or none).
  policy_denied: 403,
  // The project has policy owners: a new version needs an owner's signature, and this one is not.
  owner_signature_required: 403,
  // An owner list that cannot be read (the path is named), or a write of the wrong form for the project.
  invalid_owners: 400,
  invalid_owner_signature: 403,
  // The key is bound to another project than the request names.
  wrong_project: 403,
  // A key is created for a project, named by its identity: never for whichever project asks first.
  project_required: 400,
  // The key signs for no project: an earlier release made it without one and no carry-over has bound it.
  key_unbound: 403,
  // A carry-over found another document where it would write its copy: nothing was overwritten.
  carry_over_conflict: 409,
  unauthorized: 401,
  not_found: 404,
  // The key id already holds a key of another request: never an address to hand out.
  key_conflict: 409,
  // The store belongs to another deployment (its marker names it).
  store_owned: 409,
  // A body over its route's limit (LIMITS.body), refused before it is read further.
  too_large: 413,
  // Every thread that reads operations is taken and LIMITS.queue operations wait: retry shortly.
  busy: 503,
  // Another transaction is signed at this nonce and the request does not name it as replaced.
  nonce_conflict: 409,
  internal: 500,
};

export class SignerError extends Error {
  constructor(
    readonly code: SignerErrorCode,
    message: string,
    readonly retryable = code === 'vault_sealed' || code === 'vault_unavailable' || code === 'busy',
  ) {
    super(message);
    this.name = 'SignerError';
  }

  get status(): number {
    return STATUS[this.code];
  }
}
