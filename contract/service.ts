/**
 * Service signatures (docs/audit.md): the deployment's own P-256 key, kept in Vault transit (or the
 * local store), signs only these purposes. The signer builds the whole JWS signing input from the
 * purpose and the payload it checks, so a caller never chooses the bytes that are signed.
 */

/** What the service key signs, and the JWS `typ` each purpose's header carries (a checkpoint is never taken for an attestation). */
export const SERVICE_PURPOSES = {
  'membership-attestation': 'custody-membership+jwt',
  'audit-checkpoint': 'custody-audit-checkpoint+jwt',
} as const;

export type ServicePurpose = keyof typeof SERVICE_PURPOSES;

export const isServicePurpose = (v: unknown): v is ServicePurpose => typeof v === 'string' && Object.hasOwn(SERVICE_PURPOSES, v);

/** The claims of a membership attestation (issue 34, point 2). */
export interface AttestationClaims {
  iss: string;
  sub: string;
  membershipType: string;
  tokenId: string;
  status: 'active';
  projectId: string;
  iat: number;
  exp: number;
}

/** A checkpoint of the audit chain: its size (rows sealed), the hash of its last row (hex), the time it was taken. */
export interface CheckpointClaims {
  size: number;
  head: string;
  time: string;
}

/** The payload's fields per purpose, each with its JSON type: nothing more, nothing less. */
export const SERVICE_PAYLOAD_FIELDS: { readonly [P in ServicePurpose]: Readonly<Record<string, 'string' | 'number'>> } = {
  'membership-attestation': {
    iss: 'string',
    sub: 'string',
    membershipType: 'string',
    tokenId: 'string',
    status: 'string',
    projectId: 'string',
    iat: 'number',
    exp: 'number',
  },
  'audit-checkpoint': { size: 'number', head: 'string', time: 'string' },
};

/** `POST /v1/service/sign`: a purpose and its payload. */
export interface ServiceSignRequest {
  purpose: ServicePurpose;
  payload: Record<string, string | number>;
}

/** The compact JWS (ES256) and the `kid` of the key version that signed it. */
export interface ServiceSignAnswer {
  jws: string;
  kid: string;
}

/** One public key of the service key (RFC 7517), a version not yet retired. */
export interface ServiceJwk {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  kid: string;
  alg: 'ES256';
  use: 'sig';
}

/** `GET /v1/service/keys`: every version not yet retired, newest first. */
export interface ServiceKeys {
  keys: ServiceJwk[];
}
