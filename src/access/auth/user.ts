import type { Knex } from 'knex';
import type { AppEnv } from '../../platform/config/config.js';
import { AppError, ValidationError } from '../../platform/http/errors.js';
import type { AppContext } from '../../platform/http/context.js';
import { foldIdentity } from '../identity/fold.js';
import { projectKeyHash } from '../../domains/projects/keys.js';
import { tokenClaimOf } from '../../domains/projects/issuer-binding.js';
import type { AuthFailureGuard } from '../../platform/ratelimit/auth-failures.js';
import type { ProjectKeyCache } from '../tenancy/key-cache.js';
import { findProjectAndWallet, type CallerProject } from '../tenancy/project-key.js';
import type { SigninWallet } from '../../domains/wallets/repository.js';
import { InvalidTokenError, parseJwt, type OidcVerifier, type ParsedJwt } from './oidc.js';

/** The end user present: their project (by its key) and their verified e-mail (by their JWT). */
export interface UserCaller {
  project: CallerProject;
  email: string;
  /** The body's `token` (alias `any_other_tokens`), passed through to the wallet-created webhook. */
  token: string | null;
  requestId: string;
  /** The wallet row read with the project (sign-in): for `email` as the token claimed it before verification. */
  prefetched?: { emailLower: string; wallet: SigninWallet | undefined };
}

/**
 * How a user endpoint authenticates (access/endpoints/declare.ts mounts it): `beforeBody` refuses what the
 * headers can before the body is read, then reads the body at the route's limit and looks only at
 * its project key (the signing endpoint, whose body may be 300 KiB); `afterValidation` follows the
 * interface's order: body validated → project key (400) → Authorization (401) → the JWT (401).
 */
export type UserAuthRule = { readonly verify: 'beforeBody' } | { readonly verify: 'afterValidation'; readonly prefetchWallet?: true };

export interface UserAuthDeps {
  db: Knex;
  oidc: OidcVerifier;
  env: AppEnv;
  /** Where known project keys are answered from (access/tenancy/key-cache.ts). */
  projectCache?: ProjectKeyCache;
  /** Runs once the project is known and before its JWT is verified (the project's rate limit). */
  beforeJwt?: (ctx: AppContext, project: CallerProject) => void;
  /** Every refused authentication (no or unknown project key, no or invalid JWT) counts against the client address. */
  authFailures?: AuthFailureGuard;
}

const BEARER = /^Bearer ([\x21-\x7e]+)$/i;

const missingToken = () =>
  new AppError(401, 'missing_token', 'Unauthorized', "The end user's JWT is required as Authorization: Bearer.", undefined, {
    'WWW-Authenticate': 'Bearer',
  });

/** The name idempotency records and audit entries give the user present: the project and the folded e-mail. */
export const userKey = (caller: UserCaller): string => `user:${caller.project.id}:${foldIdentity(caller.email)}`;

/** The body's `key`, when it is one a project could have; anything else reads as none (400 missing_project_key). */
export function projectKeyIn(body: unknown): string | undefined {
  const key = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>)['key'] : undefined;
  return typeof key === 'string' && key.length <= 256 ? key : undefined;
}

export class UserAuthenticator {
  constructor(private readonly deps: UserAuthDeps) {}

  /** A refused authentication: counted against the client address (429 past RATE_LIMIT_AUTH_FAILURES), then thrown. */
  #failed(ctx: AppContext, err: AppError): never {
    this.deps.authFailures?.failed(ctx);
    throw err;
  }

  /**
   * What can be refused from the headers alone, before a body is read: an address over its failed
   * authentications (429), no bearer or one that is not a JWT in compact form (401, counted).
   */
  requireBearer(ctx: AppContext): ParsedJwt {
    this.deps.authFailures?.before(ctx);
    const bearer = BEARER.exec(ctx.get('Authorization'))?.[1];
    if (bearer === undefined) return this.#failed(ctx, missingToken());
    const parsed = parseJwt(bearer);
    if (parsed.problem !== undefined) return this.#failed(ctx, new InvalidTokenError(parsed.problem));
    return parsed;
  }

  /**
   * Project key present and valid for this environment (400) → Authorization present (401) → the
   * JWT against the project's issuer (401). Every refusal counts as a failed authentication.
   */
  async identify(
    body: { key?: string | undefined; token?: string | undefined; any_other_tokens?: string | undefined },
    ctx: AppContext,
    options: { prefetchWallet?: boolean } = {},
  ): Promise<UserCaller> {
    const { deps } = this;
    const authorization = ctx.get('Authorization');
    if (body.token !== undefined && body.any_other_tokens !== undefined && body.token !== body.any_other_tokens) {
      throw new ValidationError('token and any_other_tokens are two names for one value; they differ.', [
        { in: 'body', path: '/any_other_tokens', message: 'differs from token' },
      ]);
    }
    deps.authFailures?.before(ctx);
    if (body.key === undefined)
      return this.#failed(
        ctx,
        new ValidationError(
          'The project key is required in the body field `key`.',
          [{ in: 'body', path: '/key', message: 'is required' }],
          'missing_project_key',
        ),
      );
    const hash = projectKeyHash(body.key, deps.env);
    const bearer = BEARER.exec(authorization)?.[1];
    // Nothing of the token reaches the database before it is verified: the project first (the key
    // cache answers most), the user's wallet only for the verified e-mail.
    const found = hash ? await findProjectAndWallet(deps.db, hash, deps.env, undefined, deps.projectCache) : undefined;
    const project = found?.project;
    if (!project) {
      return this.#failed(
        ctx,
        new ValidationError(
          'The project key is not valid for this environment.',
          [{ in: 'body', path: '/key', message: 'is not a valid key' }],
          'invalid_project_key',
        ),
      );
    }
    deps.beforeJwt?.(ctx, project);
    if (!bearer) return this.#failed(ctx, missingToken());
    let user: Awaited<ReturnType<OidcVerifier['verify']>>;
    try {
      user = await deps.oidc.verify(bearer, {
        issuer: project.issuer,
        requireVerifiedEmail: project.require_verified_email,
        tokenClaim: tokenClaimOf(project),
        audience: project.audience,
      });
    } catch (err) {
      if (err instanceof InvalidTokenError) this.#failed(ctx, err);
      throw err;
    }
    // Sign-in's wallet, for the verified e-mail: with the project cached (it is now), one round trip.
    const withWallet = options.prefetchWallet && hash ? await findProjectAndWallet(deps.db, hash, deps.env, user.email, deps.projectCache) : undefined;
    const prefetched = withWallet?.wallet !== undefined ? { emailLower: foldIdentity(user.email), wallet: withWallet.wallet ?? undefined } : undefined;
    return {
      project,
      email: user.email,
      token: body.token ?? body.any_other_tokens ?? null,
      requestId: ctx.state.requestId,
      ...(prefetched ? { prefetched } : {}),
    };
  }
}
