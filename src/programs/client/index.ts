/**
 * A typed client for the service's HTTP API. Its operation table is checked against the served
 * OpenAPI document (test/programs/client/client.test.ts); its types are written from the route
 * schemas (types.ts, checked equal to them at compile time by test/programs/client/types.test.ts).
 * Depends on nothing but `fetch`, and imports nothing outside this folder, so the CLI, the demo and
 * customer backends can all use it, and it is published on its own (packages/client).
 */
import type * as T from './types.js';
import { OPERATIONS } from './operations.js';

export { OPERATIONS };
export type * from './types.js';

export type OperationId = keyof typeof OPERATIONS;
type Id = number | string;
/** Query values as the API takes them (strings), numbers and booleans converted. */
type QueryOf<Q> = { [K in keyof Q]?: string | number | boolean };

/** A 4xx or 5xx answer; `problem` holds the service's explanation. */
export class CustodyApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: T.Problem | undefined,
    readonly retryAfterS: number | undefined,
  ) {
    super(problem ? `${status} ${problem.code}: ${problem.detail}` : `HTTP ${status}`);
    this.name = 'CustodyApiError';
  }
}

export interface ClientOptions {
  baseUrl: string;
  /** An API token (sk_…) for management calls. */
  token?: string;
  /** Per-request timeout; default 30 s. */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

interface CallOptions {
  params?: Record<string, Id>;
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  /** Overrides the client's token (the user's JWT for the wallet calls). */
  bearer?: string;
  idempotencyKey?: string;
}

export interface WriteOptions {
  idempotencyKey?: string;
}

/** Who asks a wallet to sign: the customer's backend (a signer token) or the user present. */
export type SignAs = { projectId: Id; walletId: Id } | { projectKey: string; userJwt: string };
type Operation = T.RpcBody;

export class CustodyClient {
  readonly #base: string;
  readonly #token: string | undefined;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;

  constructor(options: ClientOptions) {
    this.#base = options.baseUrl.replace(/\/+$/, '');
    this.#token = options.token;
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#fetch = options.fetch ?? fetch;
  }

  /** One operation of the table: path filled, query encoded, JSON in and out, problems thrown. */
  async call<T>(operation: OperationId, options: CallOptions = {}): Promise<T> {
    const [method, template] = OPERATIONS[operation];
    const path = template.replace(/\{(\w+)\}/g, (_, name: string) => {
      const value = options.params?.[name];
      if (value === undefined) throw new TypeError(`${operation}: path parameter ${name} is missing`);
      return encodeURIComponent(String(value));
    });
    const search = new URLSearchParams();
    for (const [k, v] of Object.entries(options.query ?? {})) if (v !== undefined) search.set(k, String(v));
    const headers: Record<string, string> = { accept: 'application/json' };
    const bearer = options.bearer ?? this.#token;
    if (bearer !== undefined) headers['authorization'] = `Bearer ${bearer}`;
    if (options.idempotencyKey !== undefined) headers['idempotency-key'] = options.idempotencyKey;
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    const qs = search.toString();
    const res = await this.#fetch(`${this.#base}${path}${qs ? `?${qs}` : ''}`, {
      method,
      headers,
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
      signal: AbortSignal.timeout(this.#timeoutMs),
    });
    const text = await res.text();
    const parsed: unknown = text !== '' && /json/.test(res.headers.get('content-type') ?? '') ? JSON.parse(text) : undefined;
    if (res.status >= 400) {
      const retry = Number(res.headers.get('retry-after'));
      throw new CustodyApiError(res.status, parsed as T.Problem | undefined, Number.isFinite(retry) && retry > 0 ? retry : undefined);
    }
    return parsed as T;
  }

  /** Every item of a cursor-paged list, page by page. */
  async *all<K extends string, T>(key: K, page: (cursor: string | undefined) => Promise<{ [P in K]: T[] } & { nextCursor: string | null }>): AsyncGenerator<T> {
    let cursor: string | undefined;
    do {
      const result = await page(cursor);
      yield* result[key];
      cursor = result.nextCursor ?? undefined;
    } while (cursor !== undefined);
  }

  // ---- Wallets: the project key in the body, the end user's JWT as the bearer. ----
  signIn(projectKey: string, userJwt: string, token?: string) {
    return this.call<T.SignInOut>('signIn', { body: { key: projectKey, ...(token === undefined ? {} : { token }) }, bearer: userJwt });
  }
  createWalletAsync(projectKey: string, userJwt: string, token?: string) {
    return this.call<T.Accepted>('createWalletAsync', { body: { key: projectKey, ...(token === undefined ? {} : { token }) }, bearer: userJwt });
  }
  /** Testnet with the development identity provider only: a user's ID token for a project whose issuer is that provider. */
  createDevToken(projectId: Id, body: { email: string; emailVerified?: boolean; ttlSeconds?: number }) {
    return this.call<{ token: string; issuer: string; audience: string; expiresAt: string }>('createDevToken', { params: { projectId }, body });
  }

  checkIssuer(projectId: Id, sampleJwt: string) {
    return this.call<T.IssuerCheckOut>('checkIssuer', { params: { projectId }, body: { token: sampleJwt } });
  }
  listWallets(projectId: Id, query: QueryOf<T.ListWalletsQuery> = {}) {
    return this.call<T.WalletList>('listWallets', { params: { projectId }, query });
  }
  getWallet(projectId: Id, walletId: Id) {
    return this.call<T.WalletOut>('getWallet', { params: { projectId, walletId } });
  }

  // ---- Memberships ----
  issueMemberships(items: T.IssueBody, projectId?: Id, options: WriteOptions = {}) {
    return this.call<T.IssuedOut>('issueMemberships', { body: items, query: { projectId }, ...options });
  }
  /** The record, or undefined after a hard delete (204). */
  revokeMembership(body: T.RevokeBody, projectId?: Id, options: WriteOptions = {}) {
    return this.call<T.MembershipOut | undefined>('revokeMembership', { body, query: { projectId }, ...options });
  }
  transferMembership(body: T.TransferBody, projectId?: Id, options: WriteOptions = {}) {
    return this.call<T.MembershipOut>('transferMembership', { body, query: { projectId }, ...options });
  }
  viewMemberships(query: QueryOf<T.ViewQuery> = {}) {
    return this.call<T.MembershipList>('viewMemberships', { query });
  }

  // ---- Organisations, projects, tokens, audit ----
  listOrganisations(query: QueryOf<T.ListOrganisationsQuery> = {}) {
    return this.call<T.OrganisationList>('listOrganisations', { query });
  }
  createOrganisation(name: string, options: WriteOptions = {}) {
    return this.call<T.OrganisationOut>('createOrganisation', { body: { name }, ...options });
  }
  getOrganisation(id: Id) {
    return this.call<T.OrganisationOut>('getOrganisation', { params: { id } });
  }
  renameOrganisation(id: Id, name: string) {
    return this.call<T.OrganisationOut>('renameOrganisation', { params: { id }, body: { name } });
  }
  deleteOrganisation(id: Id) {
    return this.call<undefined>('deleteOrganisation', { params: { id } });
  }
  undeleteOrganisation(id: Id, options: WriteOptions = {}) {
    return this.call<T.OrganisationOut>('undeleteOrganisation', { params: { id }, ...options });
  }
  /** Filters: `actor` and `target` exactly, `action` by how it begins, `from`/`to` ISO 8601 times (`to` excluded). */
  listAudit(id: Id, query: QueryOf<T.ListAuditQuery> = {}) {
    return this.call<T.AuditList>('listAudit', { params: { id }, query });
  }
  /** The chain's status over the organisation's newest rows, as the service sees it (`custody audit verify` checks a whole export). */
  verifyAudit(id: Id) {
    return this.call<T.AuditVerification>('verifyAudit', { params: { id } });
  }
  /** One page of the organisation's audit export: NDJSON text, its last line `{type:'end', lastSeq, more}` (docs/audit.md). */
  async exportAudit(id: Id, query: { after?: number; limit?: number } = {}): Promise<string> {
    const search = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined) search.set(k, String(v));
    const qs = search.toString();
    const headers: Record<string, string> = { accept: 'application/x-ndjson' };
    if (this.#token !== undefined) headers['authorization'] = `Bearer ${this.#token}`;
    // NDJSON, not JSON: outside the operation table, which lists the JSON operations.
    const res = await this.#fetch(`${this.#base}/api/v1/organisations/${encodeURIComponent(String(id))}/audit/export${qs ? `?${qs}` : ''}`, {
      headers,
      signal: AbortSignal.timeout(this.#timeoutMs),
    });
    const text = await res.text();
    if (res.status >= 400) {
      const retry = Number(res.headers.get('retry-after'));
      const problem = /json/.test(res.headers.get('content-type') ?? '') ? (JSON.parse(text) as T.Problem) : undefined;
      throw new CustodyApiError(res.status, problem, Number.isFinite(retry) && retry > 0 ? retry : undefined);
    }
    return text;
  }
  /** The service key's public keys (verifies attestations and audit checkpoints). */
  getServiceJwks() {
    return this.call<T.ServiceJwks>('getServiceJwks');
  }
  /** Whether a wallet holds an active membership of the type, with an attestation when it does. */
  checkMembership(query: { walletAddress: string; membershipType: string; projectId?: Id }) {
    return this.call<T.MembershipCheck>('checkMembership', { query });
  }
  /** The user present checks their own wallet (project key and their JWT). */
  checkOwnMembership(projectKey: string, userJwt: string, membershipType: string) {
    return this.call<T.MembershipCheck>('checkOwnMembership', { body: { key: projectKey, membershipType }, bearer: userJwt });
  }
  createProject(organisationId: Id, body: T.CreateProjectBody, options: WriteOptions = {}) {
    return this.call<T.ProjectCreated>('createProject', { params: { id: organisationId }, body, ...options });
  }
  listProjects(organisationId: Id, query: QueryOf<T.ListProjectsQuery> = {}) {
    return this.call<T.ProjectList>('listProjects', { params: { id: organisationId }, query });
  }
  getProject(projectId: Id) {
    return this.call<T.ProjectOut>('getProject', { params: { projectId } });
  }
  updateProject(projectId: Id, body: T.UpdateProjectBody) {
    return this.call<T.ProjectOut>('updateProject', { params: { projectId }, body });
  }
  deleteProject(projectId: Id) {
    return this.call<undefined>('deleteProject', { params: { projectId } });
  }
  rotateProjectKey(projectId: Id, graceSeconds?: number, options: WriteOptions = {}) {
    return this.call<T.KeyRotated>('rotateProjectKey', {
      params: { projectId },
      body: graceSeconds === undefined ? {} : { graceSeconds },
      ...options,
    });
  }
  rotateWalletWebhookSecret(projectId: Id, options: WriteOptions = {}) {
    return this.call<T.WalletWebhookSecretRotated>('rotateWalletWebhookSecret', { params: { projectId }, ...options });
  }
  createToken(organisationId: Id, body: T.CreateTokenBody, options: WriteOptions = {}) {
    return this.call<T.TokenCreated>('createToken', { params: { id: organisationId }, body, ...options });
  }
  listTokens(organisationId: Id, query: QueryOf<T.ListTokensQuery> = {}) {
    return this.call<T.TokenList>('listTokens', { params: { id: organisationId }, query });
  }
  revokeToken(organisationId: Id, tokenId: Id) {
    return this.call<undefined>('revokeToken', { params: { id: organisationId, tokenId } });
  }

  // ---- Webhooks ----
  listEventTypes() {
    return this.call<T.EventCatalogueOut>('listEventTypes');
  }
  listWebhooks(projectId: Id, query: QueryOf<T.ListWebhooksQuery> = {}) {
    return this.call<T.SubscriptionList>('listWebhooks', { params: { projectId }, query });
  }
  createWebhook(projectId: Id, body: T.CreateWebhookBody, options: WriteOptions = {}) {
    return this.call<T.SubscriptionCreated>('createWebhook', { params: { projectId }, body, ...options });
  }
  getWebhook(projectId: Id, webhookId: Id) {
    return this.call<T.SubscriptionOut>('getWebhook', { params: { projectId, webhookId } });
  }
  updateWebhook(projectId: Id, webhookId: Id, body: T.UpdateWebhookBody) {
    return this.call<T.SubscriptionOut>('updateWebhook', { params: { projectId, webhookId }, body });
  }
  deleteWebhook(projectId: Id, webhookId: Id) {
    return this.call<undefined>('deleteWebhook', { params: { projectId, webhookId } });
  }
  rotateWebhookSecret(projectId: Id, webhookId: Id, secret?: string, options: WriteOptions = {}) {
    return this.call<T.SecretOut>('rotateWebhookSecret', {
      params: { projectId, webhookId },
      body: secret === undefined ? {} : { secret },
      ...options,
    });
  }
  testWebhook(projectId: Id, webhookId: Id, options: WriteOptions = {}) {
    return this.call<T.TestSent>('testWebhook', { params: { projectId, webhookId }, ...options });
  }
  listFailedDeliveries(projectId: Id, query: { limit?: number; cursor?: string } = {}) {
    return this.call<T.FailedDeliveryList>('listFailedDeliveries', { params: { projectId }, query });
  }
  retryFailedDelivery(projectId: Id, deliveryId: Id, options: WriteOptions = {}) {
    return this.call<T.RetryAccepted>('retryFailedDelivery', { params: { projectId, deliveryId }, ...options });
  }

  /** `client.wallets.rpc(as, operation)`: signs under the project's policy; 403 policy_denied names the rule. */
  readonly wallets = {
    rpc: (as: SignAs, operation: Operation, options: WriteOptions = {}): Promise<T.RpcOut> =>
      'projectKey' in as
        ? this.call<T.RpcOut>('signAsUser', { body: { key: as.projectKey, ...operation }, bearer: as.userJwt, ...options })
        : this.signWithWallet(as.projectId, as.walletId, operation, options),
    /**
     * The wallet's address: the backend reads it (`getWallet`, a signer or read token); the user
     * present's comes from sign-in (`signIn`, which creates the wallet if the user has none).
     */
    address: async (as: SignAs): Promise<string> =>
      'projectKey' in as ? (await this.signIn(as.projectKey, as.userJwt)).walletAddress : (await this.getWallet(as.projectId, as.walletId)).walletAddress,
  };

  /** Signs with a wallet under the project's policy (a signer token); 403 policy_denied names the rule. */
  signWithWallet(projectId: Id, walletId: Id, body: T.RpcBody, options: WriteOptions = {}) {
    return this.call<T.RpcOut>('signWithWallet', { params: { projectId, walletId }, body, ...options });
  }

  /**
   * `client.transactions`: sends from a wallet, which the service prices, signs under the project's
   * policy, broadcasts and follows to its confirmation depth (docs/transactions.md).
   */
  readonly transactions = {
    /** A send by the backend (a signer token): the transaction as it stands (202), `submitted` or `queued` with `waiting`. */
    send: (projectId: Id, walletId: Id, body: T.SendBody, options: WriteOptions = {}) =>
      this.call<T.TransactionOut>('sendTransaction', { params: { projectId, walletId }, body, ...options }),
    /** A send by the user present, from their own wallet (their JWT, the project key). */
    sendAsUser: (as: { projectKey: string; userJwt: string }, body: T.SendBody, options: WriteOptions = {}) =>
      this.call<T.TransactionOut>('sendAsUser', { body: { key: as.projectKey, ...body }, bearer: as.userJwt, ...options }),
    /** One transaction, with its signed attempts. */
    get: (projectId: Id, transactionId: Id) => this.call<T.TransactionOut>('getTransaction', { params: { projectId, transactionId } }),
    /** A page of the project's transactions, oldest first (`walletId`, `chainId`, `status` filter). */
    list: (projectId: Id, query: QueryOf<T.ListTransactionsQuery> = {}) => this.call<T.TransactionList>('listTransactions', { params: { projectId }, query }),
    /** Cancelled at once while queued; else replaced by a no-op at its nonce (409 transaction_settled once mined). */
    cancel: (projectId: Id, transactionId: Id, options: WriteOptions = {}) =>
      this.call<T.TransactionOut>('cancelTransaction', { params: { projectId, transactionId }, ...options }),
    /** Re-priced now, within the chain's caps (409 not_signed while it waits in its queue). */
    speedUp: (projectId: Id, transactionId: Id, options: WriteOptions = {}) =>
      this.call<T.TransactionOut>('speedUpTransaction', { params: { projectId, transactionId }, ...options }),
  };

  // ---- Signing policies ----
  /** A new version; `ifVersion`: the version it replaces (409 policy_conflict when that is not the newest). */
  putPolicy(projectId: Id, policy: T.PutPolicyBody, ifVersion?: number) {
    return this.call<T.PolicyVersionOut>('putPolicy', {
      params: { projectId },
      body: policy,
      query: ifVersion === undefined ? {} : { ifVersion },
    });
  }
  getPolicy(projectId: Id) {
    return this.call<T.PolicyVersionOut>('getPolicy', { params: { projectId } });
  }
  listPolicyVersions(projectId: Id, query: { limit?: number; cursor?: string } = {}) {
    return this.call<T.PolicyVersionList>('listPolicyVersions', { params: { projectId }, query });
  }
  /** `{ keys }` while the project has no owners; then `{ signed }`, an owner's JWS over `{ projectId, version, owners }`. */
  putPolicyOwners(projectId: Id, body: T.PutOwnersBody, ifVersion?: number) {
    return this.call<T.OwnersOut>('putPolicyOwners', {
      params: { projectId },
      body,
      query: ifVersion === undefined ? {} : { ifVersion },
    });
  }
  getPolicyOwners(projectId: Id) {
    return this.call<T.OwnersOut>('getPolicyOwners', { params: { projectId } });
  }
  evaluatePolicy(projectId: Id, body: T.EvaluateBody) {
    return this.call<T.EvaluateOut>('evaluatePolicy', { params: { projectId }, body });
  }

  // ---- Operations ----
  getHealth() {
    return this.call<{ status: 'ok' }>('getHealth');
  }
  getReadiness() {
    return this.call<{ status: 'ready'; checks: Record<string, string> }>('getReadiness');
  }
}
