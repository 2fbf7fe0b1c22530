import { SIGNER_BODY_BYTES } from '../../../contract/index.js';

/**
 * What the API holds of the signer's body limits (the contract's, documented in docs/signing.md
 * "Limits"), to refuse early what the signer would refuse: the signer's own checks decide, and a
 * refusal of its own comes back as the API's problem (src/platform/signer/client.ts).
 */
const KIB = 1024;

/** A signing, dry-run or policy request to the signer, as the JSON the API sends: the largest the signer reads. */
export const SIGNER_MAX_BODY_BYTES = Math.max(SIGNER_BODY_BYTES.operation, SIGNER_BODY_BYTES.document);
/**
 * The API's own limit for a body carrying an operation or a policy: under SIGNER_MAX_BODY_BYTES, so
 * that the envelope the API adds (project, caller, author) still fits.
 */
export const OPERATION_BODY_BYTES = 300 * KIB;
