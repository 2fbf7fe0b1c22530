/**
 * The structured signing methods (docs/signing.md): the API accepts exactly these and the signer
 * reads each one (keyvault/sign/operation.ts). A new method is one entry here plus its reading.
 */
export const SIGNING_METHODS = ['personal_sign', 'eth_signTypedData_v4', 'eth_signTransaction', 'eth_signAuthorization', 'eth_sendTransaction'] as const;
export type SigningMethod = (typeof SIGNING_METHODS)[number];

export const isSigningMethod = (v: unknown): v is SigningMethod => typeof v === 'string' && (SIGNING_METHODS as readonly string[]).includes(v);

/**
 * Why a transaction to be broadcast by the service is signed (docs/transactions.md): a send, a fee
 * bump of one already signed, a cancel (a no-op at its nonce) or a gap fill (a no-op at a nonce
 * nothing else will take). A policy reads it as the `purpose` field of `eth_sendTransaction`.
 */
export const SEND_PURPOSES = ['send', 'speedUp', 'cancel', 'gapFill'] as const;
export type SendPurpose = (typeof SEND_PURPOSES)[number];

/** The methods that sign a transaction: each signature is checked by the signer's nonce guard. */
export const TRANSACTION_METHODS = ['eth_signTransaction', 'eth_sendTransaction'] as const satisfies readonly SigningMethod[];

/** Who asks for a signature: the user present (their JWT) or the customer's backend (an API token). */
export const CALLERS = ['user', 'server'] as const;
export type Caller = (typeof CALLERS)[number];
