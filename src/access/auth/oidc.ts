import { duplicateName } from '../../../contract/index.js';
import { carriesClaim, type TokenClaim } from '../../domains/projects/issuer-binding.js';
import { systemClock } from '../../platform/runtime/clock.js';
import { idpFetches, jwtKeyCache } from '../../platform/logging/metrics.js';
import { compactVerify, createLocalJWKSet, decodeJwt, decodeProtectedHeader, errors as joseErrors, jwtVerify, type JSONWebKeySet, type JWTPayload } from 'jose';
import { AppError } from '../../platform/http/errors.js';
import type { EgressPolicy } from '../../platform/net/egress.js';
import { OutboundError, outboundRequest } from '../../platform/net/outbound.js';
import { safeText } from '../../platform/text/safe.js';
import type { WarnOncePer } from '../../platform/logging/once.js';
import { setRecent } from '../../platform/runtime/recent.js';

/**
 * `email_verified` as providers send it (docs/interface.md section 4): only `true` and the string
 * `"true"` mean verified; an absent claim is not a statement either way; anything else
 * (`false`, `"false"`, `"False"`, `1`, `"yes"`, `null`) is not verified.
 */
export function emailVerified(value: unknown): boolean {
  return value === undefined || value === true || value === 'true';
}

/** Any failed check of docs/interface.md section 11: 401 `invalid_token`, with the check named, never the token. */
export class InvalidTokenError extends AppError {
  constructor(detail: string) {
    super(401, 'invalid_token', 'Unauthorized', detail, undefined, { 'WWW-Authenticate': 'Bearer error="invalid_token"' });
  }
}

/** An identity provider that could not be reached or answered an HTTP error (the outcome its fetch is counted by). */
class IdpFetchError extends InvalidTokenError {
  constructor(
    detail: string,
    readonly outcome: 'unreachable' | 'http_status',
  ) {
    super(detail);
  }
}

export interface OidcOptions {
  audience: string;
  clockToleranceS: number;
  /** Lifetime of cached discovery documents and key sets. */
  cacheTtlS: number;
  /** Bound on the number of issuers cached. */
  maxIssuers: number;
  /** An unknown `kid` re-fetches the key set at most this often per issuer. */
  refetchIntervalMs: number;
  fetchTimeoutMs: number;
  egress: EgressPolicy;
  extraCa: string | undefined;
  now?: () => number;
  /** Identity-provider failures (unreachable, bad answers), at warn, once per issuer and cause per minute. */
  failures?: WarnOncePer;
  /** An issuer whose key set this process holds (the development identity provider): never discovered over the network. */
  local?: { readonly issuer: string; keySet(): Promise<JSONWebKeySet> };
}

export interface IssuerCheck {
  name: string;
  outcome: 'passed' | 'failed' | 'skipped';
  detail?: string;
}

/** What verifying a user's JWT needs of the project it is for. */
export interface VerifyingProject {
  issuer: string;
  requireVerifiedEmail: boolean;
  /** A claim the token must carry (domains/projects/issuer-binding.ts); null or absent: none. */
  tokenClaim?: TokenClaim | null;
  /** The audience its tokens carry instead of the service's (the customer's client id); null or absent: the service's. */
  audience?: string | null;
}

export interface VerifiedUser {
  email: string;
  claims: JWTPayload;
}

interface IssuerKeys {
  jwks: JSONWebKeySet;
  /** Built once per fetched key set: jose caches imported keys inside it, so verifying does not re-import RSA keys. */
  getKey: ReturnType<typeof createLocalJWKSet>;
  fetchedAt: number;
  lastRefetchAt: number;
}

const MAX_DOCUMENT_BYTES = 512 * 1024;
/** Longer tokens are refused before any parsing (real ID tokens are a few KiB). */
const MAX_TOKEN_CHARS = 16 * 1024;
/** Key sets with more keys are refused as misconfigured (IdPs publish a handful). */
const MAX_KEYS = 100;
const KID = /^[\x21-\x7e]{1,256}$/;

/**
 * Whether every member name of a JSON object text is distinct within its object (RFC 7519
 * section 4: a JWT with duplicate claim names is rejected here, not read one way or the other).
 */
export const uniqueTopLevelNames = (json: string): boolean => duplicateName(json) === undefined;

/** JSON's insignificant whitespace (RFC 8259): space, tab, line feed, carriage return. */

/** A compact JWS decoded once, not verified: its header, its claims, or what is wrong with its form. */
export interface ParsedJwt {
  token: string;
  header?: Record<string, unknown>;
  /** The payload as a JSON object, when it is one; read before verification only to look things up. */
  claims?: Record<string, unknown>;
  /** The first problem of form found (an InvalidTokenError detail). */
  problem?: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Decodes a compact JWS's header and payload once (sign-in reads the claimed `email` before the
 * signature is checked, to prefetch the wallet; verification then reuses the header): three parts,
 * a JSON object header, and no repeated member names in header or payload (RFC 7519 section 4).
 */
export function parseJwt(token: string): ParsedJwt {
  if (token.length > MAX_TOKEN_CHARS) return { token, problem: `token: longer than ${MAX_TOKEN_CHARS} characters` };
  const parts = token.split('.');
  if (parts.length !== 3) return { token, problem: 'token: not a signed JWT in compact form' };
  const headerText = Buffer.from(parts[0] ?? '', 'base64url').toString('utf8');
  const payloadText = Buffer.from(parts[1] ?? '', 'base64url').toString('utf8');
  let header: unknown;
  try {
    header = JSON.parse(headerText);
  } catch {
    return { token, problem: 'token: not a signed JWT in compact form' };
  }
  if (!isObject(header)) return { token, problem: 'token: not a signed JWT in compact form' };
  if (!uniqueTopLevelNames(headerText) || !uniqueTopLevelNames(payloadText)) {
    return { token, header, problem: 'token: a header parameter or claim name appears twice' };
  }
  let claims: unknown;
  try {
    claims = JSON.parse(payloadText);
  } catch {
    claims = undefined; // jose's verification reports it
  }
  return { token, header, ...(isObject(claims) ? { claims } : {}) };
}

/**
 * Verifies end users' JWTs against the issuer registered for their project: discovery over
 * HTTPS, the key set it names, RS256 only, `iss`, `aud`, `exp`, `email`, `email_verified`.
 */
export class OidcVerifier {
  readonly #cache = new Map<string, IssuerKeys>();
  readonly #loading = new Map<string, Promise<IssuerKeys>>();
  readonly #now: () => number;

  constructor(private readonly options: OidcOptions) {
    this.#now = options.now ?? systemClock;
  }

  async #fetchJson(url: string, what: string): Promise<unknown> {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new InvalidTokenError(`${what}: not a URL`);
    }
    if (parsed.protocol !== 'https:') throw new InvalidTokenError(`${what}: must be fetched over https`);
    try {
      const res = await outboundRequest(
        parsed,
        { method: 'GET', headers: { accept: 'application/json' } },
        {
          policy: this.options.egress,
          connectTimeoutMs: this.options.fetchTimeoutMs,
          timeoutMs: this.options.fetchTimeoutMs,
          maxBodyBytes: MAX_DOCUMENT_BYTES,
          refuseLarger: true,
          extraCa: this.options.extraCa,
          userAgent: 'custody-service/oidc',
        },
      );
      if (res.status !== 200) throw new IdpFetchError(`${what}: answered HTTP ${res.status}`, 'http_status');
      return JSON.parse(res.body.toString('utf8')) as unknown;
    } catch (err) {
      if (err instanceof InvalidTokenError) throw err;
      if (err instanceof OutboundError) throw new IdpFetchError(`${what}: unreachable (${err.kind}: ${err.message})`, 'unreachable');
      throw new InvalidTokenError(`${what}: not valid JSON`);
    }
  }

  /** A fetch of one document, counted by its outcome (anything but unreachable or an HTTP status: invalid). */
  async #counted<T>(document: 'discovery' | 'jwks', fetch: () => Promise<T>): Promise<T> {
    try {
      const value = await fetch();
      idpFetches.inc({ document, outcome: 'ok' });
      return value;
    } catch (err) {
      idpFetches.inc({ document, outcome: err instanceof IdpFetchError ? err.outcome : 'invalid' });
      throw err;
    }
  }

  /** The discovery document's `jwks_uri`, after checking the document names the project's issuer. */
  async #discover(issuer: string): Promise<string> {
    const discovery = await this.#fetchJson(`${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`, 'discovery document');
    if (typeof discovery !== 'object' || discovery === null) throw new InvalidTokenError('discovery document: not a JSON object');
    const doc = discovery as Record<string, unknown>;
    if (doc['issuer'] !== issuer) throw new InvalidTokenError('discovery document: its issuer does not equal the project issuer');
    if (typeof doc['jwks_uri'] !== 'string') throw new InvalidTokenError('discovery document: jwks_uri missing');
    return doc['jwks_uri'];
  }

  async #keySet(jwksUri: string): Promise<JSONWebKeySet> {
    const jwks = await this.#fetchJson(jwksUri, 'key set (jwks_uri)');
    if (typeof jwks !== 'object' || jwks === null || !Array.isArray((jwks as Record<string, unknown>)['keys'])) {
      throw new InvalidTokenError('key set (jwks_uri): "keys" is not an array');
    }
    if (((jwks as Record<string, unknown[]>)['keys'] ?? []).length > MAX_KEYS) throw new InvalidTokenError(`key set (jwks_uri): more than ${MAX_KEYS} keys`);
    return jwks as JSONWebKeySet;
  }

  /** The issuer's key set: the local one's, or fetched by discovery. */
  async #jwksOf(issuer: string): Promise<JSONWebKeySet> {
    if (this.options.local?.issuer === issuer) return this.options.local.keySet();
    const jwksUri = await this.#counted('discovery', () => this.#discover(issuer));
    return this.#counted('jwks', () => this.#keySet(jwksUri));
  }

  async #load(issuer: string): Promise<IssuerKeys> {
    try {
      const jwks = await this.#jwksOf(issuer);
      const now = this.#now();
      return { jwks, getKey: createLocalJWKSet(jwks), fetchedAt: now, lastRefetchAt: now };
    } catch (err) {
      // The caller sees 401; the operator sees why, once per issuer and cause.
      if (err instanceof InvalidTokenError)
        this.options.failures?.warn(`oidc:${issuer}:${err.detail}`, { issuer, reason: err.detail }, `identity provider failed: ${issuer}`);
      throw err;
    }
  }

  /**
   * Every check of section 11 for a sample token, each with its outcome, fetched afresh and
   * without creating anything (`POST /project/{id}/issuer/check`). A check whose input is
   * missing because an earlier one failed is reported as skipped.
   */
  async diagnose(token: string, project: VerifyingProject): Promise<IssuerCheck[]> {
    const checks: IssuerCheck[] = [];
    const run = async <T>(name: string, fn: () => Promise<T> | T): Promise<T | undefined> => {
      try {
        const value = await fn();
        checks.push({ name, outcome: 'passed' });
        return value;
      } catch (err) {
        checks.push({ name, outcome: 'failed', detail: err instanceof InvalidTokenError ? err.detail : describeJoseError(err) });
        return undefined;
      }
    };
    const skip = (...names: string[]) => names.forEach((name) => checks.push({ name, outcome: 'skipped' }));

    const local = this.options.local?.issuer === project.issuer ? this.options.local : undefined;
    let jwks: JSONWebKeySet | undefined;
    if (local) {
      checks.push({ name: 'discovery', outcome: 'passed', detail: 'the development identity provider of this deployment: its keys are local' });
      jwks = await run('jwks', () => local.keySet());
    } else {
      const jwksUri = await run('discovery', () => this.#discover(project.issuer));
      if (jwksUri === undefined) skip('jwks');
      else jwks = await run('jwks', () => this.#keySet(jwksUri));
    }
    const header = await run('alg', () => {
      const h = decodeProtectedHeader(token);
      if (h.alg !== 'RS256') throw new InvalidTokenError(`alg: must be RS256 (got ${String(h.alg).slice(0, 20)})`);
      return h;
    });
    if (jwks === undefined || header === undefined) {
      skip('kid', 'signature');
    } else {
      const known = await run('kid', () => {
        if (header.kid !== undefined && !jwks.keys.some((k) => k.kid === header.kid)) throw new InvalidTokenError('kid: no key of the issuer has this kid');
        return true;
      });
      if (known) await run('signature', async () => compactVerify(token, createLocalJWKSet(jwks), { algorithms: ['RS256'] }));
      else skip('signature');
    }
    let claims: JWTPayload | undefined;
    try {
      claims = decodeJwt(token);
    } catch {
      skip('iss', 'aud', 'exp', 'email', 'email_verified');
      return checks;
    }
    const nowS = this.#now() / 1000;
    await run('iss', () => {
      if (claims.iss !== project.issuer) throw new InvalidTokenError('iss: does not equal the project issuer');
    });
    await run('aud', () => {
      const aud = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
      const audience = project.audience ?? this.options.audience;
      if (!aud.includes(audience)) throw new InvalidTokenError(`aud: must include ${audience}`);
    });
    await run('exp', () => {
      if (typeof claims.exp !== 'number') throw new InvalidTokenError('exp: claim missing');
      if (claims.exp + this.options.clockToleranceS <= nowS) throw new InvalidTokenError('exp: the token has expired');
    });
    await run('email', () => {
      if (typeof claims['email'] !== 'string' || claims['email'] === '') throw new InvalidTokenError('email: claim missing or not a string');
      if (!safeText(claims['email'])) throw new InvalidTokenError('email: the claim holds a NUL or an unpaired surrogate');
    });
    await run('email_verified', () => {
      if (project.requireVerifiedEmail && !emailVerified(claims['email_verified']))
        throw new InvalidTokenError('email_verified: the project requires a verified e-mail');
    });
    const claim = project.tokenClaim;
    if (claim) {
      await run('tokenClaim', () => {
        if (!carriesClaim(claims, claim)) throw new InvalidTokenError(`${claim.name}: does not name this project`);
      });
    }
    return checks;
  }

  /** The issuer's keys when they are cached and fresh (every request after the first: no promise to wait for). */
  #cachedKeys(issuer: string): IssuerKeys | undefined {
    const cached = this.#cache.get(issuer);
    if (cached && this.#now() - cached.fetchedAt < this.options.cacheTtlS * 1000) {
      jwtKeyCache.inc({ result: 'hit' });
      return cached;
    }
    return undefined;
  }

  /** One fetch at a time per issuer; the cache is bounded (oldest entry out first). */
  async #keys(issuer: string, refresh: boolean): Promise<IssuerKeys> {
    const cached = refresh ? undefined : this.#cachedKeys(issuer);
    if (cached) return cached;
    jwtKeyCache.inc({ result: 'miss' });
    let loading = this.#loading.get(issuer);
    if (!loading) {
      loading = this.#load(issuer).finally(() => this.#loading.delete(issuer));
      this.#loading.set(issuer, loading);
    }
    const fresh = await loading;
    setRecent(this.#cache, issuer, fresh, this.options.maxIssuers);
    return fresh;
  }

  /** `parsed`: the token as parseJwt decoded it already, if it did. */
  async verify(token: string, project: VerifyingProject, parsed?: ParsedJwt): Promise<VerifiedUser> {
    const { header, problem } = parsed?.token === token ? parsed : parseJwt(token);
    if (problem !== undefined || header === undefined) throw new InvalidTokenError(problem ?? 'token: not a signed JWT in compact form');
    if (header['alg'] !== 'RS256') throw new InvalidTokenError(`alg: must be RS256 (got ${String(header['alg']).slice(0, 20)})`);
    if (header['crit'] !== undefined) throw new InvalidTokenError('crit: no critical header extensions are supported');
    // A kid that cannot name a key never triggers a key-set re-fetch.
    const kid = header['kid'];
    if (kid !== undefined && (typeof kid !== 'string' || !KID.test(kid))) throw new InvalidTokenError('kid: not a valid key id');

    let keys = this.#cachedKeys(project.issuer) ?? (await this.#keys(project.issuer, false));
    const knows = (k: IssuerKeys) => kid === undefined || k.jwks.keys.some((key) => key.kid === kid);
    if (!knows(keys) && this.#now() - keys.lastRefetchAt >= this.options.refetchIntervalMs) {
      // An unknown kid: the IdP may have rotated its keys. One re-fetch, rate-limited per issuer.
      keys = await this.#keys(project.issuer, true);
    }
    if (!knows(keys)) throw new InvalidTokenError('kid: no key of the issuer has this kid');

    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, keys.getKey, {
        algorithms: ['RS256'],
        issuer: project.issuer,
        audience: project.audience ?? this.options.audience,
        clockTolerance: this.options.clockToleranceS,
        requiredClaims: ['exp', 'iss', 'aud'],
        currentDate: new Date(this.#now()),
      }));
    } catch (err) {
      throw new InvalidTokenError(describeJoseError(err));
    }
    const email = payload['email'];
    if (typeof email !== 'string' || email.length === 0 || email.length > 320) throw new InvalidTokenError('email: claim missing or not a string');
    if (!safeText(email)) throw new InvalidTokenError('email: the claim holds a NUL or an unpaired surrogate');
    if (project.requireVerifiedEmail && !emailVerified(payload['email_verified'])) {
      throw new InvalidTokenError('email_verified: the project requires a verified e-mail');
    }
    if (project.tokenClaim && !carriesClaim(payload, project.tokenClaim)) throw new InvalidTokenError(`${project.tokenClaim.name}: does not name this project`);
    return { email, claims: payload };
  }
}

function describeJoseError(err: unknown): string {
  if (err instanceof joseErrors.JWTExpired) return 'exp: the token has expired';
  if (err instanceof joseErrors.JWTClaimValidationFailed) return `${err.claim}: ${err.reason === 'missing' ? 'claim missing' : 'check failed'}`;
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) return 'signature: verification failed';
  if (err instanceof joseErrors.JOSEAlgNotAllowed) return 'alg: must be RS256';
  if (err instanceof joseErrors.JWKSNoMatchingKey || err instanceof joseErrors.JWKSMultipleMatchingKeys) return 'kid: no usable key of the issuer matches';
  if (err instanceof joseErrors.JWTInvalid || err instanceof joseErrors.JWSInvalid) return 'token: malformed';
  return 'token: verification failed';
}
