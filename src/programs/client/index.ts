/**
 * A typed client for the service's HTTP API. Its operation table is checked against the served
 * OpenAPI document (test/programs/client/client.test.ts); its types are the same TypeBox schemas the routes use.
 * Depends on nothing but `fetch`, so the CLI, the demo and customer backends can all use it.
 */
import type { Static, TSchema } from '@sinclair/typebox';
import type { AuditListOut } from '../../domains/audit/routes.js';
import type { Problem as ProblemSchema } from '../../platform/http/schemas.js';
import type { IssueBody, IssuedOut, MembershipList, MembershipOut, RevokeBody, TransferBody, ViewQuery } from '../../domains/memberships/schemas.js';
import type { ListOrganisationsQuery, OrganisationList, OrganisationOut } from '../../domains/organisations/schemas.js';
import type {
  CreateProjectBody,
  KeyRotated,
  ListProjectsQuery,
  ProjectCreated,
  ProjectList,
  ProjectOut,
  UpdateProjectBody,
  WalletWebhookSecretRotated,
} from '../../domains/projects/schemas.js';
import type {
  EvaluateBody,
  EvaluateOut,
  OwnersOut,
  PolicyVersionList,
  PolicyVersionOut,
  PutOwnersBody,
  PutPolicyBody,
} from '../../domains/signing/policies/schemas.js';
import type { CreateTokenBody, ListTokensQuery, TokenCreated, TokenList } from '../../domains/tokens/schemas.js';
import type { Accepted, IssuerCheckOut, ListWalletsQuery, RpcBody, RpcOut, SignInOut, WalletList, WalletOut } from '../../domains/wallets/schemas.js';
import type {
  CreateWebhookBody,
  EventCatalogueOut,
  FailedDeliveryList,
  ListWebhooksQuery,
  RetryAccepted,
  SecretOut,
  SubscriptionCreated,
  SubscriptionList,
  SubscriptionOut,
  TestSent,
  UpdateWebhookBody,
} from '../../domains/webhooks/schemas.js';

import { OPERATIONS } from './operations.js';

export { OPERATIONS };

export type OperationId = keyof typeof OPERATIONS;
type Out<T extends TSchema> = Static<T>;
type In<T extends TSchema> = Static<T>;
type Id = number | string;
/** Query values as the API takes them (strings), numbers and booleans converted. */
type QueryOf<T extends TSchema> = { [K in keyof Static<T>]?: string | number | boolean };

/** The problem details of docs/interface.md section 2. */
export type Problem = Static<typeof ProblemSchema>;

/** A 4xx or 5xx answer; `problem` holds the service's explanation. */
export class CustodyApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem | undefined,
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
type Operation = Static<typeof RpcBody>;

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
      throw new CustodyApiError(res.status, parsed as Problem | undefined, Number.isFinite(retry) && retry > 0 ? retry : undefined);
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
    return this.call<Out<typeof SignInOut>>('signIn', { body: { key: projectKey, ...(token === undefined ? {} : { token }) }, bearer: userJwt });
  }
  createWalletAsync(projectKey: string, userJwt: string, token?: string) {
    return this.call<Out<typeof Accepted>>('createWalletAsync', { body: { key: projectKey, ...(token === undefined ? {} : { token }) }, bearer: userJwt });
  }
  /** Testnet with the development identity provider only: a user's ID token for a project whose issuer is that provider. */
  createDevToken(projectId: Id, body: { email: string; emailVerified?: boolean; ttlSeconds?: number }) {
    return this.call<{ token: string; issuer: string; audience: string; expiresAt: string }>('createDevToken', { params: { projectId }, body });
  }

  checkIssuer(projectId: Id, sampleJwt: string) {
    return this.call<Out<typeof IssuerCheckOut>>('checkIssuer', { params: { projectId }, body: { token: sampleJwt } });
  }
  listWallets(projectId: Id, query: QueryOf<typeof ListWalletsQuery> = {}) {
    return this.call<Out<typeof WalletList>>('listWallets', { params: { projectId }, query });
  }
  getWallet(projectId: Id, walletId: Id) {
    return this.call<Out<typeof WalletOut>>('getWallet', { params: { projectId, walletId } });
  }

  // ---- Memberships ----
  issueMemberships(items: In<typeof IssueBody>, projectId?: Id, options: WriteOptions = {}) {
    return this.call<Out<typeof IssuedOut>>('issueMemberships', { body: items, query: { projectId }, ...options });
  }
  /** The record, or undefined after a hard delete (204). */
  revokeMembership(body: In<typeof RevokeBody>, projectId?: Id, options: WriteOptions = {}) {
    return this.call<Out<typeof MembershipOut> | undefined>('revokeMembership', { body, query: { projectId }, ...options });
  }
  transferMembership(body: In<typeof TransferBody>, projectId?: Id, options: WriteOptions = {}) {
    return this.call<Out<typeof MembershipOut>>('transferMembership', { body, query: { projectId }, ...options });
  }
  viewMemberships(query: QueryOf<typeof ViewQuery> = {}) {
    return this.call<Out<typeof MembershipList>>('viewMemberships', { query });
  }

  // ---- Organisations, projects, tokens, audit ----
  listOrganisations(query: QueryOf<typeof ListOrganisationsQuery> = {}) {
    return this.call<Out<typeof OrganisationList>>('listOrganisations', { query });
  }
  createOrganisation(name: string, options: WriteOptions = {}) {
    return this.call<Out<typeof OrganisationOut>>('createOrganisation', { body: { name }, ...options });
  }
  getOrganisation(id: Id) {
    return this.call<Out<typeof OrganisationOut>>('getOrganisation', { params: { id } });
  }
  renameOrganisation(id: Id, name: string) {
    return this.call<Out<typeof OrganisationOut>>('renameOrganisation', { params: { id }, body: { name } });
  }
  deleteOrganisation(id: Id) {
    return this.call<undefined>('deleteOrganisation', { params: { id } });
  }
  undeleteOrganisation(id: Id, options: WriteOptions = {}) {
    return this.call<Out<typeof OrganisationOut>>('undeleteOrganisation', { params: { id }, ...options });
  }
  listAudit(id: Id, query: { limit?: number; cursor?: string } = {}) {
    return this.call<AuditListOut>('listAudit', { params: { id }, query });
  }
  createProject(organisationId: Id, body: In<typeof CreateProjectBody>, options: WriteOptions = {}) {
    return this.call<Out<typeof ProjectCreated>>('createProject', { params: { id: organisationId }, body, ...options });
  }
  listProjects(organisationId: Id, query: QueryOf<typeof ListProjectsQuery> = {}) {
    return this.call<Out<typeof ProjectList>>('listProjects', { params: { id: organisationId }, query });
  }
  getProject(projectId: Id) {
    return this.call<Out<typeof ProjectOut>>('getProject', { params: { projectId } });
  }
  updateProject(projectId: Id, body: In<typeof UpdateProjectBody>) {
    return this.call<Out<typeof ProjectOut>>('updateProject', { params: { projectId }, body });
  }
  deleteProject(projectId: Id) {
    return this.call<undefined>('deleteProject', { params: { projectId } });
  }
  rotateProjectKey(projectId: Id, graceSeconds?: number, options: WriteOptions = {}) {
    return this.call<Out<typeof KeyRotated>>('rotateProjectKey', {
      params: { projectId },
      body: graceSeconds === undefined ? {} : { graceSeconds },
      ...options,
    });
  }
  rotateWalletWebhookSecret(projectId: Id, options: WriteOptions = {}) {
    return this.call<Out<typeof WalletWebhookSecretRotated>>('rotateWalletWebhookSecret', { params: { projectId }, ...options });
  }
  createToken(organisationId: Id, body: In<typeof CreateTokenBody>, options: WriteOptions = {}) {
    return this.call<Out<typeof TokenCreated>>('createToken', { params: { id: organisationId }, body, ...options });
  }
  listTokens(organisationId: Id, query: QueryOf<typeof ListTokensQuery> = {}) {
    return this.call<Out<typeof TokenList>>('listTokens', { params: { id: organisationId }, query });
  }
  revokeToken(organisationId: Id, tokenId: Id) {
    return this.call<undefined>('revokeToken', { params: { id: organisationId, tokenId } });
  }

  // ---- Webhooks ----
  listEventTypes() {
    return this.call<Out<typeof EventCatalogueOut>>('listEventTypes');
  }
  listWebhooks(projectId: Id, query: QueryOf<typeof ListWebhooksQuery> = {}) {
    return this.call<Out<typeof SubscriptionList>>('listWebhooks', { params: { projectId }, query });
  }
  createWebhook(projectId: Id, body: In<typeof CreateWebhookBody>, options: WriteOptions = {}) {
    return this.call<Out<typeof SubscriptionCreated>>('createWebhook', { params: { projectId }, body, ...options });
  }
  getWebhook(projectId: Id, webhookId: Id) {
    return this.call<Out<typeof SubscriptionOut>>('getWebhook', { params: { projectId, webhookId } });
  }
  updateWebhook(projectId: Id, webhookId: Id, body: In<typeof UpdateWebhookBody>) {
    return this.call<Out<typeof SubscriptionOut>>('updateWebhook', { params: { projectId, webhookId }, body });
  }
  deleteWebhook(projectId: Id, webhookId: Id) {
    return this.call<undefined>('deleteWebhook', { params: { projectId, webhookId } });
  }
  rotateWebhookSecret(projectId: Id, webhookId: Id, secret?: string, options: WriteOptions = {}) {
    return this.call<Out<typeof SecretOut>>('rotateWebhookSecret', {
      params: { projectId, webhookId },
      body: secret === undefined ? {} : { secret },
      ...options,
    });
  }
  testWebhook(projectId: Id, webhookId: Id, options: WriteOptions = {}) {
    return this.call<Out<typeof TestSent>>('testWebhook', { params: { projectId, webhookId }, ...options });
  }
  listFailedDeliveries(projectId: Id, query: { limit?: number; cursor?: string } = {}) {
    return this.call<Out<typeof FailedDeliveryList>>('listFailedDeliveries', { params: { projectId }, query });
  }
  retryFailedDelivery(projectId: Id, deliveryId: Id, options: WriteOptions = {}) {
    return this.call<Out<typeof RetryAccepted>>('retryFailedDelivery', { params: { projectId, deliveryId }, ...options });
  }

  /** `client.wallets.rpc(as, operation)`: signs under the project's policy; 403 policy_denied names the rule. */
  readonly wallets = {
    rpc: (as: SignAs, operation: Operation, options: WriteOptions = {}): Promise<Out<typeof RpcOut>> =>
      'projectKey' in as
        ? this.call<Out<typeof RpcOut>>('signAsUser', { body: { key: as.projectKey, ...operation }, bearer: as.userJwt, ...options })
        : this.signWithWallet(as.projectId, as.walletId, operation, options),
  };

  /** Signs with a wallet under the project's policy (a signer token); 403 policy_denied names the rule. */
  signWithWallet(projectId: Id, walletId: Id, body: In<typeof RpcBody>, options: WriteOptions = {}) {
    return this.call<Out<typeof RpcOut>>('signWithWallet', { params: { projectId, walletId }, body, ...options });
  }

  // ---- Signing policies ----
  /** A new version; `ifVersion`: the version it replaces (409 policy_conflict when that is not the newest). */
  putPolicy(projectId: Id, policy: In<typeof PutPolicyBody>, ifVersion?: number) {
    return this.call<Out<typeof PolicyVersionOut>>('putPolicy', {
      params: { projectId },
      body: policy,
      query: ifVersion === undefined ? {} : { ifVersion },
    });
  }
  getPolicy(projectId: Id) {
    return this.call<Out<typeof PolicyVersionOut>>('getPolicy', { params: { projectId } });
  }
  listPolicyVersions(projectId: Id, query: { limit?: number; cursor?: string } = {}) {
    return this.call<Out<typeof PolicyVersionList>>('listPolicyVersions', { params: { projectId }, query });
  }
  /** `{ keys }` while the project has no owners; then `{ signed }`, an owner's JWS over `{ projectId, version, owners }`. */
  putPolicyOwners(projectId: Id, body: In<typeof PutOwnersBody>, ifVersion?: number) {
    return this.call<Out<typeof OwnersOut>>('putPolicyOwners', {
      params: { projectId },
      body,
      query: ifVersion === undefined ? {} : { ifVersion },
    });
  }
  getPolicyOwners(projectId: Id) {
    return this.call<Out<typeof OwnersOut>>('getPolicyOwners', { params: { projectId } });
  }
  evaluatePolicy(projectId: Id, body: In<typeof EvaluateBody>) {
    return this.call<Out<typeof EvaluateOut>>('evaluatePolicy', { params: { projectId }, body });
  }

  // ---- Operations ----
  getHealth() {
    return this.call<{ status: 'ok' }>('getHealth');
  }
  getReadiness() {
    return this.call<{ status: 'ready'; checks: Record<string, string> }>('getReadiness');
  }
}
