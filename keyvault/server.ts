import {
  CARRY_KEYS_MAX,
  matchRoute,
  scopedProject,
  type BindAnswer,
  type CarriedDocuments,
  type CarriedKeys,
  type CreatedKey,
  type CreateKeyRequest,
  type EvaluateAnswer,
  type Health,
  type KeyLookup,
  type OwnersAnswer,
  type PolicyDeniedProblem,
  type NonceConflictProblem,
  type PolicyVersionAnswer,
  type PolicyVersionList,
  type SignAnswer,
  type ServiceKeys,
  type ServiceSignAnswer,
  type SignerProblem,
  type SignerRouteName,
  type RouteParams,
} from '../contract/index.js';
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { TLSSocket } from 'node:tls';
import type { KeyCreator } from './create-key.js';
import { SignerError } from './errors.js';
import { carryDocuments, bindKey } from './carry-over.js';
import { DEPLOYMENT_ID, KEY_ID, legacyProjectIdOf, NEW_KEY_ID, projectIdOf } from './key-id.js';
import type { SignerLog } from './log.js';
import type { PolicyStore, PolicyVersion } from './policy/store.js';
import { fields, parseBody } from './envelope.js';
import { LIMITS } from './limits.js';
import { admitted, type OwnerKey, type OwnerStore, type Submitted } from './policy/owners.js';
import type { Version } from './policy/versions.js';
import type { ReadPool } from './read-pool.js';
import { PolicyDenied, type Signer } from './signing.js';
import { NonceConflict } from './sign/nonce-guard.js';
import type { KeyStore } from './stores/types.js';
import type { ServiceKey } from './service-key.js';

const REQUEST_ID = /^[\x21-\x7e]{1,200}$/;
const CARRY_PARALLEL = 16;

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** A refusal: its message cut at LIMITS.refusal.messageChars, whatever it quotes of the request. */
function sendError(res: ServerResponse, err: SignerError): void {
  const max = LIMITS.refusal.messageChars;
  const message = err.message.length > max ? `${err.message.slice(0, max)}…` : err.message;
  const problem: SignerProblem = { code: err.code, message, retryable: err.retryable };
  const body =
    err instanceof PolicyDenied
      ? ({ ...problem, rule: err.decision.rule, policyVersion: err.policyVersion, digest: err.digest } satisfies PolicyDeniedProblem)
      : err instanceof NonceConflict
        ? ({ ...problem, chainId: String(err.chainId), nonce: String(err.nonce), signed: err.signed } satisfies NonceConflictProblem)
        : problem;
  send(res, err.status, body, err.retryable ? { 'retry-after': '2' } : {});
}

/**
 * The body's bytes, at most `limit` (413 `too_large` at the first chunk past it: the rest is not
 * kept). Read with events rather than an async iterator: this runs once per key and the
 * iterator's set-up cost showed in the signer's profile.
 */
function readRaw(req: IncomingMessage, limit: number): Promise<Buffer> {
  if (!/^application\/json\b/.test(req.headers['content-type'] ?? ''))
    return Promise.reject(new SignerError('invalid_request', 'Content-Type must be application/json'));
  if (Number(req.headers['content-length']) > limit) return Promise.reject(new SignerError('too_large', `body over ${limit} bytes`));
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on('data', (chunk: Buffer) => {
      if (failed) return;
      size += chunk.length;
      if (size > limit) {
        failed = true;
        chunks.length = 0;
        reject(new SignerError('too_large', `body over ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on('error', (err) => reject(err));
    req.on('end', () => {
      if (!failed) resolve(Buffer.concat(chunks));
    });
  });
}

const readJson = async (req: IncomingMessage, limit: number = LIMITS.body.small): Promise<unknown> => parseBody(await readRaw(req, limit));

function deploymentOf(b: Record<string, unknown>): string {
  const id = b['deploymentId'];
  if (typeof id !== 'string' || !DEPLOYMENT_ID.test(id)) throw new SignerError('invalid_request', 'deploymentId must be a lower-case UUID');
  return id;
}

function parseCreate(body: unknown): Omit<CreateKeyRequest, 'purpose' | 'projectId'> & { projectId: string | undefined } {
  const b = fields(body, ['keyId', 'requestId', 'purpose', 'deploymentId', 'projectId']);
  const { keyId, requestId, purpose } = b;
  if (purpose !== 'wallet') throw new SignerError('invalid_request', 'purpose must be "wallet"');
  if (typeof keyId !== 'string' || !NEW_KEY_ID.test(keyId))
    throw new SignerError('invalid_request', 'keyId must be a random lower-case UUIDv4 chosen by the caller');
  if (typeof requestId !== 'string' || !REQUEST_ID.test(requestId)) throw new SignerError('invalid_request', 'requestId must be 1-200 printable characters');
  // Required, but refused as missing by the creator (create-key.ts), the one place of that rule.
  const projectId = b['projectId'] === undefined ? undefined : projectIdOf(b['projectId'], 'projectId');
  return { keyId, requestId, deploymentId: deploymentOf(b), projectId };
}

const presentVersion = (projectId: string, v: PolicyVersion): PolicyVersionAnswer => ({
  projectId,
  version: v.version,
  policy: v.document,
  author: v.author ?? null,
  createdAt: v.createdAt,
});

/** A versioned write: `{ baseVersion, <kind> | signed, author? }` (an owner's JWS when the project has owners). */
function versionWrite(body: unknown, kind: 'policy' | 'owners'): { base: number; author: string | undefined; submitted: Submitted } {
  const b = fields(body, ['baseVersion', kind, 'signed', 'author']);
  const base = b['baseVersion'];
  if (typeof base !== 'number' || !Number.isSafeInteger(base) || base < 0)
    throw new SignerError('invalid_request', 'baseVersion must be the newest version (0 for none)');
  const author = b['author'];
  if (author !== undefined && (typeof author !== 'string' || !/^[\x20-\x7e]{1,200}$/.test(author)))
    throw new SignerError('invalid_request', 'author must be 1-200 printable characters');
  return { base, author, submitted: { plain: b[kind], signed: b['signed'] } };
}

const presentOwners = (projectId: string, v: Version<OwnerKey[]> | undefined): OwnersAnswer => ({
  projectId,
  version: v?.version ?? 0,
  keys: v?.value ?? [],
  author: v?.author ?? null,
  createdAt: v?.createdAt ?? null,
});

/** A request to one route of the table, with that route's path parameters (as sent: ids are checked by their rules). */
interface Call<N extends SignerRouteName> {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  params: RouteParams<N>;
}

/** A non-negative integer query parameter, at most `max`. */
function count(url: URL, name: string, fallback: number, max: number): number {
  const raw = url.searchParams.get(name);
  if (raw === null) return fallback;
  if (!/^[0-9]{1,9}$/.test(raw) || Number(raw) > max) throw new SignerError('invalid_request', `${name} must be an integer from 0 to ${max}`);
  return Number(raw);
}

/**
 * The signer's versioned API (keyvault/README.md): JSON over HTTP behind a bearer secret compared in
 * constant time. Bodies are never logged. `/healthz` and `/readyz` (no auth) are for probes only.
 * Requests are dispatched by the contract's route table (contract/routes.ts), which the API's client
 * builds its paths from.
 */
export function createSignerServer(deps: {
  token: string;
  /** Accepted beside `token` while the token is rotated (KEYVAULT_TOKEN_PREVIOUS). */
  previousToken?: string | undefined;
  creator: KeyCreator;
  store: KeyStore;
  /** Service signatures (contract/service.ts). */
  serviceKey: ServiceKey;
  signer: Signer;
  policies: PolicyStore;
  owners: OwnerStore;
  /** The operator's recovery keys: may replace a project's owners when theirs are lost (KEYVAULT_RECOVERY_KEYS_FILE). */
  recoveryKeys: readonly OwnerKey[];
  /** Where operations are read: on this thread when small and cheap, else on a worker thread. */
  reader: ReadPool;
  log: SignerLog;
  /** TLS (and with `clientCa`, mutual TLS) for a listener off loopback. */
  tls?: { cert: string; key: string; clientCa: string | undefined } | undefined;
}): Server {
  // During a rotation two tokens are accepted; hashed to one length, and every one compared (no early exit).
  const expected = [deps.token, ...(deps.previousToken === undefined ? [] : [deps.previousToken])].map((t) => createHash('sha256').update(t).digest());
  const authorised = (req: IncomingMessage) => {
    const m = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
    if (m?.[1] === undefined) return false;
    const presented = createHash('sha256').update(m[1]).digest();
    let match = false;
    for (const e of expected) match = timingSafeEqual(presented, e) || match;
    return match;
  };

  /** Every route of the contract's table, by name: the compiler holds that none is missing and none is extra. */
  const routes: { [N in SignerRouteName]: (call: Call<N>) => void | Promise<void> } = {
    healthz: ({ res }) => send(res, 200, { status: 'ok' }),
    // For the orchestrator: the process serves (its start-up checks passed). Vault's seal state is
    // not readiness: a sealed Vault must not take the signer, and with it every API pod, out of
    // service; key calls answer 503 vault_sealed meanwhile and /v1/health reports it.
    readyz: ({ res }) => send(res, 200, { status: 'ready' }),
    bindDeployment: async ({ req, res }) => {
      const deploymentId = deploymentOf(fields(await readJson(req), ['deploymentId']));
      await deps.creator.bind(deploymentId);
      send(res, 200, { deploymentId } satisfies BindAnswer);
    },
    createKey: async ({ req, res }) => {
      const { keyId, requestId, deploymentId, projectId } = parseCreate(await readJson(req));
      const key = await deps.creator.create(keyId, requestId, deploymentId, projectId);
      send(res, key.created ? 201 : 200, { keyId: key.keyId, address: key.address, createdAt: key.createdAt } satisfies CreatedKey);
    },
    sign: async ({ req, res, params }) => {
      if (!KEY_ID.test(params.keyId)) throw new SignerError('invalid_request', 'not a key id');
      const { envelope, operation } = await deps.reader.read('sign', await readRaw(req, LIMITS.body.operation));
      const signed = await deps.signer.sign({ keyId: params.keyId, projectId: envelope.projectId ?? '', caller: envelope.caller, operation });
      send(res, 200, { digest: signed.digest, policyVersion: signed.policyVersion, rule: signed.rule, result: signed.answer } satisfies SignAnswer);
    },
    getKey: async ({ res, params }) => {
      if (!KEY_ID.test(params.keyId)) throw new SignerError('invalid_request', 'not a key id');
      const key = await deps.creator.get(params.keyId);
      if (!key) throw new SignerError('not_found', 'no such key');
      send(res, 200, key satisfies KeyLookup);
    },
    putPolicy: async ({ req, res, params: { projectId } }) => {
      const { base, author, submitted } = versionWrite(await readJson(req, LIMITS.body.document), 'policy');
      const { document } = await admitted(deps.owners, projectId, base + 1, 'policy', submitted);
      send(res, 201, presentVersion(projectId, await deps.policies.put(projectId, document, base, author)));
    },
    getPolicy: async ({ res, params: { projectId } }) => {
      const latest = await deps.policies.latest(projectId);
      if (!latest) throw new SignerError('not_found', 'the project has no policy: it signs nothing');
      send(res, 200, presentVersion(projectId, latest));
    },
    listPolicyVersions: async ({ res, url, params: { projectId } }) => {
      const versions = await deps.policies.list(projectId, count(url, 'after', 0, 999_999_999), count(url, 'limit', 100, 1001));
      send(res, 200, { versions: versions.map((v) => presentVersion(projectId, v)) } satisfies PolicyVersionList);
    },
    getPolicyVersion: async ({ res, params: { projectId, version: n } }) => {
      const version = await deps.policies.version(projectId, Number(n));
      if (!version) throw new SignerError('not_found', 'no such policy version');
      send(res, 200, presentVersion(projectId, version));
    },
    evaluate: async ({ req, res, params: { projectId } }) => {
      const { envelope, operation } = await deps.reader.read('evaluate', await readRaw(req, LIMITS.body.operation));
      const { decision, policyVersion } = await deps.signer.decide(projectId, operation, envelope.caller);
      send(res, 200, { ...decision, policyVersion, digest: `0x${Buffer.from(operation.digest).toString('hex')}` } satisfies EvaluateAnswer);
    },
    putOwners: async ({ req, res, params: { projectId } }) => {
      const { base, author, submitted } = versionWrite(await readJson(req, LIMITS.body.document), 'owners');
      const { document, by } = await admitted(deps.owners, projectId, base + 1, 'owners', submitted, deps.recoveryKeys);
      // A recovery is written down with the version it makes, and said where operators look.
      if (by === 'recovery') deps.log.warn({ projectId, version: base + 1 }, "a project's policy owners were replaced with the operator's recovery key");
      const recorded = by === 'recovery' ? `${author ?? 'unknown'} (recovery key)` : author;
      send(res, 201, presentOwners(projectId, await deps.owners.put(projectId, document, base, recorded)));
    },
    getOwners: async ({ res, params: { projectId } }) => send(res, 200, presentOwners(projectId, await deps.owners.latest(projectId))),
    carryDocuments: async ({ req, res, params: { projectId } }) => {
      const b = fields(await readJson(req), ['deploymentId', 'legacyProjectId']);
      const legacyProjectId = legacyProjectIdOf(b['legacyProjectId'], 'legacyProjectId');
      await deps.creator.bind(deploymentOf(b));
      const counts = await carryDocuments(deps.store, projectId, legacyProjectId, Date.now);
      // Written beside the caches: what they hold of the project is read again.
      deps.policies.forget(projectId);
      deps.owners.forget(projectId);
      send(res, 200, { projectId, legacyProjectId, ...counts } satisfies CarriedDocuments);
    },
    carryKeys: async ({ req, res, params: { projectId } }) => {
      const b = fields(await readJson(req, LIMITS.body.carryKeys), ['deploymentId', 'legacyProjectId', 'keyIds']);
      const legacyProjectId = legacyProjectIdOf(b['legacyProjectId'], 'legacyProjectId');
      const keyIds = b['keyIds'];
      if (
        !Array.isArray(keyIds) ||
        keyIds.length === 0 ||
        keyIds.length > CARRY_KEYS_MAX ||
        !keyIds.every((k): k is string => typeof k === 'string' && KEY_ID.test(k))
      )
        throw new SignerError('invalid_request', `keyIds must be a list of 1 to ${CARRY_KEYS_MAX} key ids`);
      await deps.creator.bind(deploymentOf(b));
      // A few at a time: each is up to four store round trips, and Vault serves the signing meanwhile.
      const keys: CarriedKeys['keys'] = [];
      for (let i = 0; i < keyIds.length; i += CARRY_PARALLEL) {
        keys.push(...(await Promise.all(keyIds.slice(i, i + CARRY_PARALLEL).map((keyId) => bindKey(deps.store, keyId, projectId, legacyProjectId, Date.now)))));
      }
      send(res, 200, { keys } satisfies CarriedKeys);
    },
    serviceSign: async ({ req, res }) => send(res, 200, (await deps.serviceKey.sign(await readJson(req))) satisfies ServiceSignAnswer),
    serviceKeys: async ({ res }) => send(res, 200, { keys: await deps.serviceKey.keys() } satisfies ServiceKeys),
    health: async ({ res }) => {
      const health = await deps.store.health();
      send(res, health.ok ? 200 : 503, health satisfies Health, health.ok ? {} : { 'retry-after': '2' });
    },
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://signer');
    const found = matchRoute(req.method ?? '', url.pathname);
    // Every request but the probes' (the orchestrator presents no credentials), known route or not.
    if (found?.route.auth !== false) {
      // Mutual TLS: a client certificate of the configured CA.
      if (deps.tls?.clientCa && !(req.socket as TLSSocket).authorized)
        throw new SignerError('unauthorized', 'a client certificate of the configured CA is required');
      if (!authorised(req)) throw new SignerError('unauthorized', 'a valid bearer token is required');
    }
    // Every route about a project names it by its identity, read by one rule before anything else.
    const project = scopedProject(url.pathname);
    if (project !== undefined) projectIdOf(project, 'the project id');
    if (!found) throw new SignerError('not_found', 'no such route');
    // The match's parameters are its own route's (matchRoute read them off that route's path).
    const route = routes[found.route.name] as (call: Call<SignerRouteName>) => void | Promise<void>;
    await route({ req, res, url, params: found.params as RouteParams<SignerRouteName> });
  };

  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const started = process.hrtime.bigint();
    handle(req, res)
      .catch((err: unknown) => {
        if (err instanceof SignerError) return sendError(res, err);
        deps.log.error({ err: err instanceof Error ? `${err.name}: ${err.message}` : typeof err }, 'unexpected signer error');
        return sendError(res, new SignerError('internal', 'internal error'));
      })
      .finally(() => {
        const ms = Number(process.hrtime.bigint() - started) / 1e6;
        // Answered requests at debug: the API logs each one with its request id and audits each key
        // creation; a line per key here cost the signer's main thread 10-20% of its throughput.
        const line = { method: req.method, path: req.url, status: res.statusCode, ms: Math.round(ms * 10) / 10 };
        if (res.statusCode < 400) deps.log.debug(line, 'request');
        else deps.log.info(line, 'request');
      });
  };
  if (!deps.tls) return createServer(onRequest);
  const { cert, key, clientCa } = deps.tls;
  // Client certificates are asked for and checked against `clientCa`; the handler refuses every
  // route but the probes without one (rejectUnauthorized would refuse the probes' connections too).
  return createHttpsServer(
    { cert, key, minVersion: 'TLSv1.2', ...(clientCa ? { ca: clientCa, requestCert: true, rejectUnauthorized: false } : {}) },
    onRequest,
  );
}
