// Written by scripts/client-operations.ts from the service's route schemas (src/programs/client-schemas.ts): do not edit.
// Plain types, so that the client and its package need nothing of the service.
/* eslint-disable @typescript-eslint/no-empty-object-type -- a signing operation's `params` is any object, as its schema says */

export type Problem = {
  /** urn:custody:problem:<code> */
  type: string;
  title: string;
  status: number;
  detail: string;
  /** stable snake_case machine code */
  code: string;
  requestId: string;
  errors?: {
    in?: string;
    path: string;
    message: string;
  }[];
};

export type OrganisationOut = {
  id: number;
  name: string;
  /** ISO 8601, UTC */
  createdAt: string;
  /** ISO 8601, UTC */
  updatedAt: string;
  deletedAt: string | null;
};

export type OrganisationList = {
  organisations: OrganisationOut[];
  /** pass as `cursor` for the next page; null on the last page */
  nextCursor: string | null;
};

export type ListOrganisationsQuery = {
  showDeleted?: 'true' | 'false' | '1' | '0';
  /** organisations whose name contains this, in any case */
  name?: string;
  /** page size, 1 to 1000 */
  limit?: string;
  cursor?: string;
};

export type ProjectOut = {
  id: number;
  /** The project's random identity, never reused: policy owners sign over it (`projectId` of a signed policy or owner list). */
  uid: string;
  organisationId: number;
  name: string;
  environment: 'testnet' | 'production';
  issuer: string;
  walletWebhookUrl: string | null;
  requireVerifiedEmail: boolean;
  tokenClaim: {
    /** a top-level claim of the JWT, e.g. azp, client_id, tid */
    name: string;
    value: string;
  } | null;
  audience: string | null;
  /** ISO 8601, UTC */
  createdAt: string;
  /** ISO 8601, UTC */
  updatedAt: string;
  deletedAt: string | null;
};

export type ProjectCreated = {
  id: number;
  /** The project's random identity, never reused: policy owners sign over it (`projectId` of a signed policy or owner list). */
  uid: string;
  organisationId: number;
  name: string;
  environment: 'testnet' | 'production';
  issuer: string;
  walletWebhookUrl: string | null;
  requireVerifiedEmail: boolean;
  tokenClaim: {
    /** a top-level claim of the JWT, e.g. azp, client_id, tid */
    name: string;
    value: string;
  } | null;
  audience: string | null;
  /** ISO 8601, UTC */
  createdAt: string;
  /** ISO 8601, UTC */
  updatedAt: string;
  deletedAt: string | null;
  /** shown once */
  projectKey: string;
  /** shown once, when the service generated it */
  walletWebhookSecret?: string;
};

export type ProjectList = {
  projects: ProjectOut[];
  /** pass as `cursor` for the next page; null on the last page */
  nextCursor: string | null;
};

export type ListProjectsQuery = {
  showDeleted?: 'true' | 'false' | '1' | '0';
  /** page size, 1 to 1000 */
  limit?: string;
  cursor?: string;
};

export type CreateProjectBody = {
  name: string;
  issuer: string;
  walletWebhookUrl?: string;
  walletWebhookSecret?: string;
  requireVerifiedEmail?: boolean;
  tokenClaim?: {
    /** a top-level claim of the JWT, e.g. azp, client_id, tid */
    name: string;
    value: string;
  } | null;
  audience?: string | null;
};

export type UpdateProjectBody = {
  name?: string;
  issuer?: string;
  walletWebhookUrl?: string | null;
  requireVerifiedEmail?: boolean;
  tokenClaim?: {
    /** a top-level claim of the JWT, e.g. azp, client_id, tid */
    name: string;
    value: string;
  } | null;
  audience?: string | null;
};

export type KeyRotated = {
  /** shown once */
  projectKey: string;
  /** ISO 8601, UTC */
  previousKeysExpireAt: string;
};

export type WalletWebhookSecretRotated = {
  /** shown once */
  walletWebhookSecret: string;
  /** ISO 8601, UTC */
  previousSecretExpiresAt: string;
};

export type TokenCreated = {
  id: number;
  name: string;
  role: 'admin' | 'read' | 'signer';
  scope: 'organisation' | 'project';
  organisationId: number;
  projectId: number | null;
  /** ISO 8601, UTC */
  createdAt: string;
  revokedAt: string | null;
  /** shown once */
  token: string;
};

export type TokenList = {
  tokens: {
    id: number;
    name: string;
    role: 'admin' | 'read' | 'signer';
    scope: 'organisation' | 'project';
    organisationId: number;
    projectId: number | null;
    /** ISO 8601, UTC */
    createdAt: string;
    revokedAt: string | null;
  }[];
  /** pass as `cursor` for the next page; null on the last page */
  nextCursor: string | null;
};

export type ListTokensQuery = {
  showRevoked?: 'true' | 'false' | '1' | '0';
  /** page size, 1 to 1000 */
  limit?: string;
  cursor?: string;
};

export type CreateTokenBody = {
  name: string;
  role: 'admin' | 'read' | 'signer';
  projectId?: number;
};

export type AuditEntryOut = {
  id: number;
  /** ISO 8601, UTC */
  at: string;
  organisationId: number | null;
  projectId: number | null;
  /** operator, or token:<id> */
  actor: string;
  /** <METHOD> <route>, or an event such as wallet.key_created */
  action: string;
  target: string | null;
  status: number | null;
  requestId: string | null;
  details: { [key: string]: unknown };
};

export type AuditList = {
  entries: AuditEntryOut[];
  /** pass as `cursor` for the next page; null on the last page */
  nextCursor: string | null;
};

export type ListAuditQuery = {
  /** page size, 1 to 1000 */
  limit?: string;
  cursor?: string;
  /** exactly: `operator` or `token:<id>` */
  actor?: string;
  /** how the action begins, e.g. `POST /api/v1/organisations` or `console.` */
  action?: string;
  /** exactly */
  target?: string;
  /** ISO 8601 with a time zone */
  from?: string;
  /** ISO 8601 with a time zone */
  to?: string;
};

export type AuditVerification = {
  ok: boolean;
  /** rows recomputed */
  rows: number;
  /** signed checkpoints whose head is one of these rows */
  checkpoints: number;
  /** the rows verified are those after this sequence number */
  after: number;
  lastSeq: number;
  problem?: {
    seq: number;
    kind: string;
    message: string;
  };
  lastCheckpoint: {
    size: number;
    /** ISO 8601, UTC */
    time: string;
  } | null;
  /** the organisation's rows not sealed yet (they are within about a second) */
  unsealed: number;
};

export type ServiceJwks = {
  keys: {
    kty: 'EC';
    crv: 'P-256';
    x: string;
    y: string;
    /** the RFC 7638 thumbprint of the key */
    kid: string;
    alg: 'ES256';
    use: 'sig';
  }[];
};

export type MembershipCheck = {
  active: boolean;
  /** the active membership, or null */
  membership: MembershipOut | null;
  attestation: string | null;
};

export type SignInOut = {
  walletId: number;
  /** EIP-55 checksummed */
  walletAddress: string;
  emailAddress: string;
  /** ISO 8601, UTC */
  createdAt: string;
  /** true only for the call that created the wallet */
  isNew: boolean;
};

export type Accepted = {
  status: 'accepted';
};

export type IssuerCheckOut = {
  /** every check passed */
  ok: boolean;
  issuer: string;
  checks: {
    name: string;
    outcome: 'passed' | 'failed' | 'skipped';
    detail?: string;
  }[];
};

export type WalletOut = {
  walletId: number;
  /** EIP-55 checksummed */
  walletAddress: string;
  emailAddress: string;
  /** ISO 8601, UTC */
  createdAt: string;
};

export type WalletList = {
  wallets: WalletOut[];
  /** pass as `cursor` for the next page; null on the last page */
  nextCursor: string | null;
};

export type ListWalletsQuery = {
  email?: string;
  address?: string;
  /** page size, 1 to 1000 */
  limit?: string;
  cursor?: string;
};

export type RpcBody = {
  /** an Ethereum JSON-RPC signing method */
  method: 'personal_sign' | 'eth_signTypedData_v4' | 'eth_signTransaction' | 'eth_signAuthorization' | 'eth_sendTransaction';
  /** the method's parameters: `{ message }`, `{ typedData }`, `{ transaction }` or `{ chainId, address, nonce }` */
  params: {};
};

export type RpcOut =
  | {
      signature: string;
    }
  | {
      signedTransaction: string;
      hash: string;
    }
  | {
      hash: string;
      transactionId: number;
    }
  | {
      transactionId: number;
      status: string;
      waiting: string | null;
    }
  | {
      authorization: {
        chainId: string;
        address: string;
        nonce: string;
        yParity: string;
        r: string;
        s: string;
      };
    };

/** The policy; when the project has policy owners, the signed form only. */
export type PutPolicyBody =
  | {
      rules: {
        name: string;
        action: 'allow' | 'deny';
        /** an Ethereum JSON-RPC signing method */
        method: 'personal_sign' | 'eth_signTypedData_v4' | 'eth_signTransaction' | 'eth_signAuthorization' | 'eth_sendTransaction';
        caller?: ('user' | 'server')[];
        /** a function signature such as transfer(address,uint256), for `data.args.<n>` */
        abi?: string;
        conditions?: {
          /** a field of the method's catalogue, `message.<path>` of typed data or `data.args.<n>` of a call */
          field: string;
          /** `lt`…`gte` compare quantities as big integers; `prefix` compares text; `in`/`not_in` take a list */
          op: 'eq' | 'neq' | 'in' | 'not_in' | 'lt' | 'lte' | 'gt' | 'gte' | 'prefix';
          value: string | number | boolean | (string | number | boolean)[];
        }[];
      }[];
      limits?: (
        | {
            /** an Ethereum JSON-RPC signing method */
            method: 'personal_sign' | 'eth_signTypedData_v4' | 'eth_signTransaction' | 'eth_signAuthorization' | 'eth_sendTransaction';
            per: 'wallet' | 'project';
            window: '1m' | '1h' | '24h' | '7d' | '30d';
            count: number;
          }
        | {
            /** an Ethereum JSON-RPC signing method */
            method: 'personal_sign' | 'eth_signTypedData_v4' | 'eth_signTransaction' | 'eth_signAuthorization' | 'eth_sendTransaction';
            per: 'wallet' | 'project';
            window: '1m' | '1h' | '24h' | '7d' | '30d';
            /** a budget: wei of maximum cost (gas × fee cap + value) */
            wei: string;
          }
      )[];
    }
  | {
      /** an owner's compact JWS (ES256) whose payload is `{ projectId, version, policy }` (or `owners`): the project id as a string, the version it becomes */
      signed: string;
    };

export type PolicyVersionOut = {
  version: number;
  policy: {
    rules: {
      name: string;
      action: 'allow' | 'deny';
      /** an Ethereum JSON-RPC signing method */
      method: 'personal_sign' | 'eth_signTypedData_v4' | 'eth_signTransaction' | 'eth_signAuthorization' | 'eth_sendTransaction';
      caller?: ('user' | 'server')[];
      /** a function signature such as transfer(address,uint256), for `data.args.<n>` */
      abi?: string;
      conditions?: {
        /** a field of the method's catalogue, `message.<path>` of typed data or `data.args.<n>` of a call */
        field: string;
        /** `lt`…`gte` compare quantities as big integers; `prefix` compares text; `in`/`not_in` take a list */
        op: 'eq' | 'neq' | 'in' | 'not_in' | 'lt' | 'lte' | 'gt' | 'gte' | 'prefix';
        value: string | number | boolean | (string | number | boolean)[];
      }[];
    }[];
    limits?: (
      | {
          /** an Ethereum JSON-RPC signing method */
          method: 'personal_sign' | 'eth_signTypedData_v4' | 'eth_signTransaction' | 'eth_signAuthorization' | 'eth_sendTransaction';
          per: 'wallet' | 'project';
          window: '1m' | '1h' | '24h' | '7d' | '30d';
          count: number;
        }
      | {
          /** an Ethereum JSON-RPC signing method */
          method: 'personal_sign' | 'eth_signTypedData_v4' | 'eth_signTransaction' | 'eth_signAuthorization' | 'eth_sendTransaction';
          per: 'wallet' | 'project';
          window: '1m' | '1h' | '24h' | '7d' | '30d';
          /** a budget: wei of maximum cost (gas × fee cap + value) */
          wei: string;
        }
    )[];
  };
  /** who wrote it: `operator` or `token:<id>` */
  author: string | null;
  /** ISO 8601, UTC */
  createdAt: string;
};

export type PolicyVersionList = {
  versions: PolicyVersionOut[];
  /** pass as `cursor` for the next page; null on the last page */
  nextCursor: string | null;
};

/** The owner list; once the project has owners, the signed form only. */
export type PutOwnersBody =
  | {
      /** P-256 public JWKs; an empty list ends owner signing */
      keys: {
        kty: 'EC';
        crv: 'P-256';
        x: string;
        y: string;
        kid?: string;
      }[];
    }
  | {
      /** an owner's compact JWS (ES256) whose payload is `{ projectId, version, policy }` (or `owners`): the project id as a string, the version it becomes */
      signed: string;
    };

export type OwnersOut = {
  /** 0: the project has no owners (its admins write policies) */
  version: number;
  keys: {
    kty: 'EC';
    crv: 'P-256';
    x: string;
    y: string;
    kid?: string;
  }[];
  author: string | null;
  createdAt: string | null;
};

export type EvaluateBody = {
  caller?: 'user' | 'server';
  /** an Ethereum JSON-RPC signing method */
  method: 'personal_sign' | 'eth_signTypedData_v4' | 'eth_signTransaction' | 'eth_signAuthorization' | 'eth_sendTransaction';
  /** the method's parameters, as `POST …/wallets/rpc` takes them */
  params: {};
};

export type EvaluateOut = {
  allowed: boolean;
  /** the rule that decided; null: no rule allows this */
  rule: string | null;
  /** 0: the project has no policy (it signs nothing) */
  policyVersion: number;
  /** what would be signed */
  digest: string;
};

export type MembershipOut = {
  /** a decimal unsigned 256-bit integer */
  tokenId: string;
  membershipType: string;
  walletAddress: string;
  /** Unix seconds; 0 = never */
  expiration: number;
  transferable: boolean;
  status: 'active' | 'revoked' | 'expired';
  /** ISO 8601, UTC */
  issuedAt: string;
  /** ISO 8601, UTC */
  updatedAt: string;
  revokedAt: string | null;
};

export type MembershipList = {
  memberships: MembershipOut[];
  /** pass as `cursor` for the next page; null on the last page */
  nextCursor: string | null;
};

export type IssueBody = {
  /** two parts of at most 64 characters of [A-Za-z0-9_.-] separated by one colon, e.g. gym:gold */
  membershipType: string;
  /** an EVM address */
  walletAddress: string;
  /** Unix time in seconds; 0 = never expires */
  expiration?: number;
  transferable?: boolean;
  override?: boolean;
}[];

export type IssuedOut = {
  memberships: MembershipOut[];
};

export type RevokeBody = {
  /** a decimal unsigned 256-bit integer */
  tokenId: string;
  hardDelete?: boolean;
};

export type TransferBody = {
  /** an EVM address */
  from: string;
  /** an EVM address */
  to: string;
  /** a decimal unsigned 256-bit integer */
  tokenId: string;
};

export type ViewQuery = {
  /** a positive integer id */
  projectId?: string;
  /** an EVM address */
  walletAddress?: string;
  /** two parts of at most 64 characters of [A-Za-z0-9_.-] separated by one colon, e.g. gym:gold */
  membershipType?: string;
  includeRevoked?: 'true' | 'false' | '1' | '0';
  includeExpired?: 'true' | 'false' | '1' | '0';
  /** page size, 1 to 1000 */
  limit?: string;
  cursor?: string;
};

export type SubscriptionOut = {
  id: number;
  projectId: number;
  url: string;
  events: string[];
  /** ISO 8601, UTC */
  createdAt: string;
  /** ISO 8601, UTC */
  updatedAt: string;
  deletedAt: string | null;
  disabledAt: string | null;
  disabledReason: string | null;
};

export type SubscriptionCreated = {
  id: number;
  projectId: number;
  url: string;
  events: string[];
  /** ISO 8601, UTC */
  createdAt: string;
  /** ISO 8601, UTC */
  updatedAt: string;
  deletedAt: string | null;
  disabledAt: string | null;
  disabledReason: string | null;
  /** shown once, when the service generated it */
  secret?: string;
};

export type SubscriptionList = {
  webhooks: SubscriptionOut[];
  /** pass as `cursor` for the next page; null on the last page */
  nextCursor: string | null;
};

export type ListWebhooksQuery = ListProjectsQuery;

export type CreateWebhookBody = {
  /** https (http too in testnet), at most 2,048 characters */
  url: string;
  events: string[];
  /** 16-256 printable ASCII; whsec_ + base64 of 24-64 bytes for that form */
  secret?: string;
};

export type UpdateWebhookBody = {
  /** https (http too in testnet), at most 2,048 characters */
  url?: string;
  events?: string[];
};

export type SecretOut = {
  /** shown once */
  secret: string;
};

export type TestSent = {
  status: 'accepted';
  event: 'webhook.test';
  deliveryId: number;
  /** the webhook-id header of the delivery */
  webhookId: string;
};

export type EventCatalogueOut = {
  events: {
    name: string;
    description: string;
    data: string;
  }[];
};

export type FailedDeliveryList = {
  failedDeliveries: {
    id: number;
    kind: 'wallet' | 'subscription';
    /** the subscription id; null for wallet webhooks */
    webhookId: number | null;
    event: string | null;
    url: string | null;
    /** the body that was sent */
    payload: unknown;
    attempts: number;
    lastStatus: number | null;
    lastError: string | null;
    lastResponseBody: string | null;
    lastAttemptAt: string | null;
    /** ISO 8601, UTC */
    createdAt: string;
  }[];
  /** pass as `cursor` for the next page; null on the last page */
  nextCursor: string | null;
};

export type RetryAccepted = {
  id: number;
  status: 'pending';
};

export type SendBody = {
  /** a chain the operator configured */
  chainId: number;
  /** absent or null: a contract creation */
  to?: string | null;
  /** a non-negative integer: a decimal or 0x hex string, or a JSON number up to 2^53 */
  value?: string | number;
  /** calldata, 0x hex, at most 128 KiB */
  data?: string;
  /** a non-negative integer: a decimal or 0x hex string, or a JSON number up to 2^53 */
  gas?: string | number;
  /** a non-negative integer: a decimal or 0x hex string, or a JSON number up to 2^53 */
  maxFeePerGas?: string | number;
  /** a non-negative integer: a decimal or 0x hex string, or a JSON number up to 2^53 */
  maxPriorityFeePerGas?: string | number;
};

export type TransactionOut = {
  id: number;
  projectId: number;
  walletId: number;
  chainId: number;
  kind: 'send' | 'gapFill';
  status: 'queued' | 'signed' | 'submitted' | 'mined' | 'confirmed' | 'failed' | 'replaced' | 'cancelled' | 'expired';
  waiting: string | null;
  from: string;
  to: string | null;
  /** wei, decimal */
  value: string;
  data?: string;
  nonce: string | null;
  hash: string | null;
  blockNumber: string | null;
  blockHash: string | null;
  receipt: {} | null;
  error: {
    code: string;
    message: string;
  } | null;
  cancelRequested: boolean;
  /** ISO 8601, UTC */
  createdAt: string;
  /** ISO 8601, UTC */
  updatedAt: string;
  submittedAt: string | null;
  /** ISO 8601, UTC */
  expiresAt: string;
  /** its wallet.transaction.* events so far, in order (with GET of one transaction) */
  events?: {
    sequence: number;
    type: string;
  }[];
  attempts?: {
    hash: string;
    purpose: 'send' | 'speedUp' | 'cancel' | 'gapFill';
    nonce: string;
    gas: string;
    maxFeePerGas: string;
    maxPriorityFeePerGas: string;
    replaces: string | null;
    status: string;
    /** ISO 8601, UTC */
    createdAt: string;
    broadcastAt: string | null;
  }[];
};

export type TransactionList = {
  transactions: TransactionOut[];
  /** pass as `cursor` for the next page; null on the last page */
  nextCursor: string | null;
};

export type ListTransactionsQuery = {
  /** a positive integer id */
  walletId?: string;
  chainId?: string;
  status?: 'queued' | 'signed' | 'submitted' | 'mined' | 'confirmed' | 'failed' | 'replaced' | 'cancelled' | 'expired';
  /** page size, 1 to 1000 */
  limit?: string;
  cursor?: string;
};
