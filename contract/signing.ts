/**
 * The structured signing methods (docs/signing.md): the API accepts exactly these and the signer
 * reads each one (keyvault/sign/operation.ts). A new method is one entry here plus its reading.
 */
export const SIGNING_METHODS = ['personal_sign', 'eth_signTypedData_v4', 'eth_signTransaction', 'eth_signAuthorization'] as const;
export type SigningMethod = (typeof SIGNING_METHODS)[number];

export const isSigningMethod = (v: unknown): v is SigningMethod => typeof v === 'string' && (SIGNING_METHODS as readonly string[]).includes(v);

/** Who asks for a signature: the user present (their JWT) or the customer's backend (an API token). */
export const CALLERS = ['user', 'server'] as const;
export type Caller = (typeof CALLERS)[number];
