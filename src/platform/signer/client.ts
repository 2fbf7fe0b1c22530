import { signerCalls, signerDuration } from '../logging/metrics.js';
import { request as httpRequest, type RequestOptions } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { createSecureContext } from 'node:tls';
import { AppError, DependencyUnavailableError, KeyConflictError, PayloadTooLargeError } from '../http/errors.js';
import { SIGNER_MAX_BODY_BYTES } from './limits.js';
// The signer's contract (contract/): its shapes, and the route table the paths are built from.
import {
  pathTo,
  routeNamed,
  type RouteParams,
  type SignerRouteName,
  type BindRequest,
  type CarriedDocuments,
  type CarriedKeys,
  type CarryDocumentsRequest,
  type CarryKeysRequest,
  type CreateKeyRequest,
  type CreatedKey,
  type EvaluateAnswer,
  type EvaluateRequest,
  type Health,
  type KeyLookup,
  type PolicyDeniedProblem,
  type NonceConflictProblem,
  type PolicyVersionAnswer,
  type PolicyVersionList,
  type SignAnswer,
  type SignRequestBody,
  type OwnersAnswer,
  type PutPolicyRequest,
  type SignerProblem,
  type StoreUnavailableCode,
  type ServiceJwk,
  type ServicePurpose,
  type ServiceSignRequest,
} from '../../../contract/index.js';

declare const projectUidBrand: unique symbol;
/**
 * A project as the signer knows it: its random identity (`projects.uid`), never its numeric id,
 * which a sequence hands out again after a database restore. Branded so that nothing else (a
 * number, its digits as a string) can be passed where the signer expects one.
 */
export type ProjectUid = string & { readonly [projectUidBrand]: true };

const UID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** A project identity read from elsewhere than a project row (a test, the CLI): checked, then branded. */
export function projectUid(v: string): ProjectUid {
  if (!UID.test(v)) throw new Error(`not a project uid: ${v}`);
  return v as ProjectUid;
}

/**
 * The signer has signed another transaction at this nonce with the key (409 `nonce_conflict`):
 * `signed` are their hashes, oldest first, one of which a replacement must name.
 */
export class NonceConflictError extends AppError {
  constructor(readonly signed: string[]) {
    super(409, 'nonce_conflict', 'Conflict', 'The wallet has signed another transaction at this nonce; a replacement must name it.');
  }
}

/** The signer found another document where the carry-over would put its copy (409 `carry_over_conflict`). */
export class CarryOverConflictError extends Error {}

export interface SignerKey {
  keyId: string;
  address: string;
  createdAt: string;
  /** True when this call created the key, false when the request id already had one. */
  created: boolean;
}

export interface SignerHealth {
  /** The signer process answered and took our credentials: what every endpoint needs. */
  reachable: boolean;
  /** Its key store is usable (Vault reachable and unsealed): only key creation and signing need it. */
  ok: boolean;
  backend?: string;
  sealed?: boolean;
  /** When the signer's Vault credential (an AppRole secret id) expires, as epoch seconds; null: never. */
  credentialExpiresAt?: number | null;
}

/** The signer's own answers for a key store it cannot use at the moment (the process itself is fine). */
const STORE_UNAVAILABLE = new Set<string>(['vault_sealed', 'vault_unavailable'] satisfies StoreUnavailableCode[]);

/** APP_ENV=production with a signer that reports the local development key store: refused (start and /readyz). */
const credentialExpiry = (v: unknown): Pick<SignerHealth, 'credentialExpiresAt'> =>
  v === null ? { credentialExpiresAt: null } : typeof v === 'string' && !Number.isNaN(Date.parse(v)) ? { credentialExpiresAt: Date.parse(v) / 1000 } : {};

export const developmentStoreInProduction = (appEnv: string, health: SignerHealth): boolean =>
  appEnv === 'production' && health.backend !== undefined && health.backend !== 'vault';

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

interface Reply {
  status: number;
  body: unknown;
  retryAfter: string | undefined;
}

/**
 * The API's only way to the signer (keyvault/README.md): typed calls over `unix:/path` or http(s), a
 * bearer secret, a timeout. Answers are checked field by field and only addresses and ids are
 * passed on, so nothing else the signer might send can reach the API process's callers.
 */
/** The signer's codes for a document it could not read, and what the API calls that document. */
const POINTED: ReadonlyMap<string, string> = new Map([
  ['invalid_policy', 'policy'],
  ['invalid_operation', 'operation'],
  ['invalid_owners', "policy owners' change"],
]);

export class SignerClient {
  readonly #base: { socketPath: string } | { url: URL };

  /** Keeps TLS connections to a signer in another pod (https only). */
  readonly #agent: HttpsAgent | undefined;

  /** `deploymentId`: this deployment's id (the `deployment` table), which the signer's store is bound to. */
  constructor(
    url: string,
    private readonly token: string,
    private readonly timeoutMs: number,
    readonly deploymentId: string,
    /** For https: the signer's CA, and our certificate and key for mutual TLS. */
    tls: { ca?: string | undefined; cert?: string | undefined; key?: string | undefined } = {},
  ) {
    this.#base = url.startsWith('unix:') ? { socketPath: url.slice(5) } : { url: new URL(url) };
    if ('url' in this.#base && this.#base.url.protocol === 'https:') {
      // One context for every connection (given as options, each new connection would parse them again).
      const secureContext = createSecureContext({
        minVersion: 'TLSv1.2',
        ...(tls.ca ? { ca: tls.ca } : {}),
        ...(tls.cert && tls.key ? { cert: tls.cert, key: tls.key } : {}),
      });
      this.#agent = new HttpsAgent({ keepAlive: true, secureContext });
    }
  }

  /** A call to one route of the contract's table: its method, and its path with `params` (and `query`). */
  #send<N extends SignerRouteName>(route: N, params: RouteParams<N>, body?: unknown, query = ''): Promise<Reply> {
    const { method } = routeNamed(route);
    const path = `${pathTo(route, params)}${query}`;
    const payload = body === undefined ? undefined : JSON.stringify(body);
    // What the signer would refuse unread is refused here (the caller's JSON written again can be
    // longer than it came: `1e9` is `1000000000`).
    if (payload !== undefined && payload.length > SIGNER_MAX_BODY_BYTES / 3 && Buffer.byteLength(payload) > SIGNER_MAX_BODY_BYTES)
      return Promise.reject(new PayloadTooLargeError(`${SIGNER_MAX_BODY_BYTES / 1024} KiB as the signer reads it`));
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}`, accept: 'application/json' };
    if (payload !== undefined) headers['content-type'] = 'application/json';
    const base = this.#base;
    const options: RequestOptions =
      'socketPath' in base
        ? { socketPath: base.socketPath, path, method, headers, timeout: this.timeoutMs }
        : {
            host: base.url.hostname.replace(/^\[|\]$/g, ''),
            port: base.url.port,
            path: `${base.url.pathname.replace(/\/$/, '')}${path}`,
            method,
            headers,
            timeout: this.timeoutMs,
            ...(this.#agent ? { agent: this.#agent } : {}),
          };
    const send = 'url' in base && base.url.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise<Reply>((resolve, reject) => {
      const req = send(options, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          let parsed: unknown;
          try {
            parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          } catch {
            parsed = undefined;
          }
          const retryAfter = res.headers['retry-after'];
          resolve({ status: res.statusCode ?? 0, body: parsed, retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined });
        });
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error('signer timeout')));
      req.on('error', () => reject(new DependencyUnavailableError('signer')));
      req.end(payload);
    });
  }

  #unavailable(reply: Reply): DependencyUnavailableError {
    const seconds = Number(reply.retryAfter);
    return new DependencyUnavailableError('signer', Number.isInteger(seconds) && seconds > 0 ? seconds : 2);
  }

  /** A refusal the signer gives as a conflict (409): the store is another deployment's, or the key id is taken. */
  #conflict(reply: Reply): KeyConflictError | undefined {
    if (reply.status !== 409) return undefined;
    const b = (reply.body ?? {}) as Partial<Record<keyof SignerProblem, unknown>>;
    const message = typeof b.message === 'string' ? b.message : 'conflict';
    return new KeyConflictError(b.code === ('store_owned' satisfies SignerProblem['code']) ? 'store_owned' : 'key_conflict', message);
  }

  /**
   * Binds the signer's store to this deployment (its write-once marker). Resolves when the store
   * is ours; throws KeyConflictError when it is another deployment's, DependencyUnavailableError
   * when the signer cannot answer.
   */
  /** What a call about a project waits for first (src/platform/signer/carry-over.ts); none: it goes at once. */
  #gate: ((project: ProjectUid) => Promise<void> | undefined) | undefined;

  /**
   * Holds calls that name a project (policies, owners, signing) while `gate` says so: until the
   * documents an earlier release kept under the project's numeric id are carried over to its
   * uid, a call under the uid would not see them (a policy write would not even see the
   * project's owners). Key creation is not held: a new key names its project's uid whatever was carried.
   */
  holdProjectCalls(gate: (project: ProjectUid) => Promise<void> | undefined): void {
    this.#gate = gate;
  }

  async #projectCallsOpen(project: ProjectUid): Promise<void> {
    const held = this.#gate?.(project);
    if (held) await held;
  }

  async bind(): Promise<void> {
    const reply = await this.#send('bindDeployment', {}, { deploymentId: this.deploymentId } satisfies BindRequest);
    const conflict = this.#conflict(reply);
    if (conflict) throw conflict;
    if (reply.status !== 200) throw this.#unavailable(reply);
  }

  /**
   * The key stored under `keyId` (random, chosen by the caller and kept on its row) for `requestId`:
   * created once, the same key for every retry of that request, a KeyConflictError for any other.
   * `project`: the project the key will sign for, stored with it by the signer (write-once).
   */
  async createKey(keyId: string, requestId: string, project: ProjectUid): Promise<SignerKey> {
    const end = signerDuration.startTimer({ operation: 'create_key' });
    try {
      const key = await this.#createKey(keyId, requestId, project);
      signerCalls.inc({ operation: 'create_key', outcome: 'ok' });
      return key;
    } catch (err) {
      signerCalls.inc({ operation: 'create_key', outcome: err instanceof DependencyUnavailableError ? 'unavailable' : 'error' });
      throw err;
    } finally {
      end();
    }
  }

  async #createKey(keyId: string, requestId: string, project: ProjectUid): Promise<SignerKey> {
    const body: CreateKeyRequest = { keyId, requestId, purpose: 'wallet', deploymentId: this.deploymentId, projectId: project };
    const reply = await this.#send('createKey', {}, body);
    const conflict = this.#conflict(reply);
    if (conflict) throw conflict;
    if (reply.status !== 200 && reply.status !== 201) {
      // A 400 would be a bug of ours; anything else means the signer or Vault cannot serve now.
      if (reply.status === 400) throw new Error('signer refused the request as invalid');
      throw this.#unavailable(reply);
    }
    // Checked field by field: the contract's shape, never trusted as given.
    const b = (reply.body ?? {}) as Partial<Record<keyof CreatedKey, unknown>>;
    const { address, createdAt } = b;
    if (b.keyId !== keyId || typeof address !== 'string' || !ADDRESS.test(address) || typeof createdAt !== 'string') {
      throw new Error('the signer answered with an unexpected body');
    }
    return { keyId, address, createdAt, created: reply.status === 201 };
  }

  async getKey(keyId: string): Promise<{ keyId: string; address: string } | undefined> {
    const reply = await this.#send('getKey', { keyId });
    if (reply.status === 404) return undefined;
    if (reply.status !== 200) throw this.#unavailable(reply);
    const b = (reply.body ?? {}) as Partial<Record<keyof KeyLookup, unknown>>;
    if (typeof b.address !== 'string' || !ADDRESS.test(b.address)) throw new Error('the signer answered with an unexpected body');
    return { keyId, address: b.address };
  }

  /**
   * The signer's refusal of what the caller sent (400 `invalid_policy` or `invalid_operation`, 409
   * `policy_conflict`) as the API's problem, the field named as the signer named it; anything
   * else that is not a success means the signer cannot serve now.
   */
  #refusal(reply: Reply): AppError {
    const b = (reply.body ?? {}) as Partial<Record<keyof SignerProblem, unknown>>;
    const code = typeof b.code === 'string' ? b.code : '';
    const message = typeof b.message === 'string' ? b.message : '';
    // The signer's reading problems start with the JSON pointer of what is wrong.
    const readOf = POINTED.get(code);
    if (reply.status === 400 && readOf !== undefined) {
      const at = message.indexOf(' ');
      const path = at > 0 ? message.slice(0, at) : '/';
      return new AppError(400, code, 'Bad Request', `The ${readOf} is not valid: ${message}`, [
        { in: 'body', path: path === '/' ? '' : path, message: at > 0 ? message.slice(at + 1) : message },
      ]);
    }
    if (reply.status === 403 && (code === 'owner_signature_required' || code === 'invalid_owner_signature'))
      return new AppError(403, code, 'Forbidden', message);
    if (reply.status === 409 && code === 'policy_conflict') return new AppError(409, 'policy_conflict', 'Conflict', message);
    if (reply.status === 409 && code === ('nonce_conflict' satisfies SignerProblem['code'])) {
      const signed = (reply.body as Partial<NonceConflictProblem>).signed;
      return new NonceConflictError(Array.isArray(signed) ? signed.filter((h): h is string => typeof h === 'string' && /^0x[0-9a-f]{64}$/.test(h)) : []);
    }
    // A wallet of an earlier release whose key the carry-over has not bound (yet, or at all: logged then).
    if (reply.status === 403 && code === ('key_unbound' satisfies SignerProblem['code']))
      return new AppError(
        503,
        'key_unbound',
        'Service Unavailable',
        "The wallet's key is not bound to its project in the signer yet; retry later.",
        undefined,
        {
          'Retry-After': '30',
        },
      );
    if (reply.status === 413) return new PayloadTooLargeError(`${SIGNER_MAX_BODY_BYTES / 1024} KiB as the signer reads it`);
    if (reply.status >= 400 && reply.status < 500 && reply.status !== 429)
      throw new Error(`the signer refused a request of ours (${reply.status} ${code}: ${message})`);
    return this.#unavailable(reply);
  }

  #policyVersion(v: unknown): PolicyVersionAnswer {
    const b = (v ?? {}) as Partial<Record<keyof PolicyVersionAnswer, unknown>>;
    if (
      typeof b.version !== 'number' ||
      typeof b.createdAt !== 'string' ||
      typeof b.projectId !== 'string' ||
      typeof b.policy !== 'object' ||
      b.policy === null
    ) {
      throw new Error('the signer answered with an unexpected body');
    }
    return { projectId: b.projectId, version: b.version, policy: b.policy, author: typeof b.author === 'string' ? b.author : null, createdAt: b.createdAt };
  }

  /** Writes the next version over `baseVersion`: the signer checks it and keeps it write-once. */
  async putPolicy(project: ProjectUid, submitted: { policy: unknown } | { signed: string }, baseVersion: number, author: string): Promise<PolicyVersionAnswer> {
    await this.#projectCallsOpen(project);
    const reply = await this.#send('putPolicy', { projectId: project }, { baseVersion, ...submitted, author } satisfies PutPolicyRequest);
    if (reply.status !== 201) throw this.#refusal(reply);
    return this.#policyVersion(reply.body);
  }

  /** The project's policy owners: a new list over `baseVersion` (signed by an owner once there are owners). */
  async putOwners(project: ProjectUid, submitted: { owners: unknown } | { signed: string }, baseVersion: number, author: string): Promise<OwnersAnswer> {
    await this.#projectCallsOpen(project);
    const reply = await this.#send('putOwners', { projectId: project }, { baseVersion, ...submitted, author });
    if (reply.status !== 201) throw this.#refusal(reply);
    return this.#owners(reply.body);
  }

  async getOwners(project: ProjectUid): Promise<OwnersAnswer> {
    await this.#projectCallsOpen(project);
    const reply = await this.#send('getOwners', { projectId: project });
    if (reply.status !== 200) throw this.#refusal(reply);
    return this.#owners(reply.body);
  }

  #owners(v: unknown): OwnersAnswer {
    const b = (v ?? {}) as Partial<Record<keyof OwnersAnswer, unknown>>;
    if (typeof b.version !== 'number' || !Array.isArray(b.keys) || typeof b.projectId !== 'string')
      throw new Error('the signer answered with an unexpected body');
    return {
      projectId: b.projectId,
      version: b.version,
      keys: b.keys as OwnersAnswer['keys'],
      author: typeof b.author === 'string' ? b.author : null,
      createdAt: typeof b.createdAt === 'string' ? b.createdAt : null,
    };
  }

  /** The newest version, or undefined when the project has none. */
  async getPolicy(project: ProjectUid): Promise<PolicyVersionAnswer | undefined> {
    await this.#projectCallsOpen(project);
    const reply = await this.#send('getPolicy', { projectId: project });
    if (reply.status === 404) return undefined;
    if (reply.status !== 200) throw this.#refusal(reply);
    return this.#policyVersion(reply.body);
  }

  /** Versions after `after`, oldest first. */
  async listPolicyVersions(project: ProjectUid, after: number, limit: number): Promise<PolicyVersionAnswer[]> {
    await this.#projectCallsOpen(project);
    const reply = await this.#send('listPolicyVersions', { projectId: project }, undefined, `?after=${after}&limit=${limit}`);
    if (reply.status !== 200) throw this.#refusal(reply);
    const versions = (reply.body as Partial<PolicyVersionList> | undefined)?.versions;
    if (!Array.isArray(versions)) throw new Error('the signer answered with an unexpected body');
    return versions.map((v) => this.#policyVersion(v));
  }

  /**
   * Signs an operation with the key, if the project's policy allows it: the answer, or the
   * denial with its rule (null: no rule allows it), the policy version and the digest.
   */
  async sign(
    keyId: string,
    project: ProjectUid,
    request: Omit<SignRequestBody, 'projectId'>,
  ): Promise<
    | { allowed: true; digest: string; policyVersion: number; rule: string; result: Record<string, unknown> }
    | { allowed: false; digest: string; policyVersion: number; rule: string | null }
  > {
    const end = signerDuration.startTimer({ operation: 'sign' });
    try {
      await this.#projectCallsOpen(project);
      const reply = await this.#send('sign', { keyId }, { projectId: project, ...request } satisfies SignRequestBody);
      const b = (reply.body ?? {}) as Partial<Record<keyof SignAnswer | keyof PolicyDeniedProblem, unknown>>;
      if (reply.status === 403 && b.code === 'policy_denied') {
        if (typeof b.digest !== 'string' || typeof b.policyVersion !== 'number' || (b.rule !== null && typeof b.rule !== 'string')) {
          throw new Error('the signer answered with an unexpected body');
        }
        signerCalls.inc({ operation: 'sign', outcome: 'denied' });
        return { allowed: false, digest: b.digest, policyVersion: b.policyVersion, rule: b.rule };
      }
      if (reply.status !== 200) throw this.#refusal(reply);
      if (
        typeof b.digest !== 'string' ||
        typeof b.policyVersion !== 'number' ||
        typeof b.rule !== 'string' ||
        typeof b.result !== 'object' ||
        b.result === null
      ) {
        throw new Error('the signer answered with an unexpected body');
      }
      signerCalls.inc({ operation: 'sign', outcome: 'ok' });
      return { allowed: true, digest: b.digest, policyVersion: b.policyVersion, rule: b.rule, result: b.result as Record<string, unknown> };
    } catch (err) {
      signerCalls.inc({
        operation: 'sign',
        outcome: err instanceof DependencyUnavailableError ? 'unavailable' : err instanceof AppError ? 'refused' : 'error',
      });
      throw err;
    } finally {
      end();
    }
  }

  /** The decision the newest policy gives an operation; nothing is signed. */
  async evaluatePolicy(project: ProjectUid, request: EvaluateRequest): Promise<EvaluateAnswer> {
    await this.#projectCallsOpen(project);
    const reply = await this.#send('evaluate', { projectId: project }, request);
    if (reply.status !== 200) throw this.#refusal(reply);
    const b = (reply.body ?? {}) as Partial<Record<keyof EvaluateAnswer, unknown>>;
    if (
      typeof b.allowed !== 'boolean' ||
      typeof b.policyVersion !== 'number' ||
      typeof b.digest !== 'string' ||
      (b.rule !== null && typeof b.rule !== 'string')
    ) {
      throw new Error('the signer answered with an unexpected body');
    }
    return { allowed: b.allowed, rule: b.rule, policyVersion: b.policyVersion, digest: b.digest };
  }

  /**
   * Carries the documents an earlier release kept under the project's numeric id over to its
   * identity (copies, idempotent): the number of versions of each kind it has from there. A
   * conflict (another document where a copy belongs) is an Error naming it.
   */
  async carryDocuments(project: ProjectUid, legacyProjectId: number): Promise<{ policies: number; owners: number }> {
    const body: CarryDocumentsRequest = { deploymentId: this.deploymentId, legacyProjectId: String(legacyProjectId) };
    const reply = await this.#send('carryDocuments', { projectId: project }, body);
    if (reply.status !== 200) throw this.#carryRefusal(reply);
    const b = (reply.body ?? {}) as Partial<Record<keyof CarriedDocuments, unknown>>;
    if (b.projectId !== project || typeof b.policies !== 'number' || typeof b.owners !== 'number')
      throw new Error('the signer answered with an unexpected body');
    return { policies: b.policies, owners: b.owners };
  }

  /** Binds keys of an earlier release (at most 200) to the project their wallets belong to: each key's outcome. */
  async carryKeys(project: ProjectUid, legacyProjectId: number, keyIds: string[]): Promise<CarriedKeys['keys']> {
    const body: CarryKeysRequest = { deploymentId: this.deploymentId, legacyProjectId: String(legacyProjectId), keyIds };
    const reply = await this.#send('carryKeys', { projectId: project }, body);
    if (reply.status !== 200) throw this.#carryRefusal(reply);
    const keys = (reply.body as Partial<CarriedKeys> | undefined)?.keys;
    if (
      !Array.isArray(keys) ||
      keys.length !== keyIds.length ||
      keys.some((k, i) => k.keyId !== keyIds[i] || !['bound', 'absent', 'refused'].includes(k.outcome))
    )
      throw new Error('the signer answered with an unexpected body');
    return keys;
  }

  /** A carry-over the signer refused (a bug of ours, a conflict, a signer of an earlier release) is an Error saying so; else it cannot serve now. */
  #carryRefusal(reply: Reply): Error {
    const owned = this.#conflict(reply);
    if (owned?.reason === 'store_owned') return owned;
    const b = (reply.body ?? {}) as Partial<Record<keyof SignerProblem, unknown>>;
    if (reply.status === 409 && b.code === ('carry_over_conflict' satisfies SignerProblem['code'])) return new CarryOverConflictError(String(b.message));
    if (reply.status === 404 && b.code === 'not_found')
      return new Error('the signer does not know the carry-over: it is of an earlier release; upgrade it before the API');
    if (reply.status >= 400 && reply.status < 500 && reply.status !== 429)
      return new Error(`the signer refused the carry-over (${reply.status} ${String(b.code)}: ${String(b.message)})`);
    return this.#unavailable(reply);
  }

  /** A compact JWS by the service key over `payload` for `purpose` (contract/service.ts); the signer builds what it signs. */
  async serviceSign(purpose: ServicePurpose, payload: ServiceSignRequest['payload']): Promise<string> {
    const reply = await this.#send('serviceSign', {}, { purpose, payload } satisfies ServiceSignRequest);
    if (reply.status === 400) throw new Error('signer refused the service signature request as invalid');
    if (reply.status !== 200) throw this.#unavailable(reply);
    const jws = (reply.body as { jws?: unknown } | undefined)?.jws;
    if (typeof jws !== 'string' || !/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{86}$/.test(jws))
      throw new Error('the signer answered with an unexpected body');
    return jws;
  }

  /** The service key's public keys (every version not retired), newest first, checked field by field. */
  async serviceKeys(): Promise<ServiceJwk[]> {
    const reply = await this.#send('serviceKeys', {});
    if (reply.status !== 200) throw this.#unavailable(reply);
    const keys = (reply.body as { keys?: unknown } | undefined)?.keys;
    if (!Array.isArray(keys)) throw new Error('the signer answered with an unexpected body');
    const b64u = /^[A-Za-z0-9_-]{1,100}$/;
    return keys.map((k: unknown) => {
      const j = (k ?? {}) as Partial<Record<keyof ServiceJwk, unknown>>;
      if (j.kty !== 'EC' || j.crv !== 'P-256' || j.alg !== 'ES256' || j.use !== 'sig') throw new Error('the signer answered with an unexpected key');
      for (const v of [j.x, j.y, j.kid]) if (typeof v !== 'string' || !b64u.test(v)) throw new Error('the signer answered with an unexpected key');
      return { kty: 'EC', crv: 'P-256', x: j.x as string, y: j.y as string, kid: j.kid as string, alg: 'ES256', use: 'sig' };
    });
  }

  /** Reachable, authenticated and its backend usable (Vault unsealed). Never throws. */
  async health(): Promise<SignerHealth> {
    try {
      const reply = await this.#send('health', {});
      const b = (reply.body ?? {}) as Partial<Record<keyof Health | keyof SignerProblem, unknown>>;
      const ok = reply.status === 200 && b.ok === true;
      const storeDown = reply.status === 503 && (b.sealed === true || b.ok === false || STORE_UNAVAILABLE.has(String(b.code)));
      return {
        reachable: ok || storeDown,
        ok,
        ...(typeof b.backend === 'string' ? { backend: b.backend } : {}),
        ...(typeof b.sealed === 'boolean' ? { sealed: b.sealed } : {}),
        ...credentialExpiry(b.credentialExpiresAt),
      };
    } catch {
      return { reachable: false, ok: false };
    }
  }
}
