import { tokenClaimOf } from '../projects/issuer-binding.js';
import type { Clock } from '../clock.js';
import type { Knex } from 'knex';
import type { AppContext } from '../http/context.js';
import { InvalidTokenError, parseJwt, type OidcVerifier, type ParsedJwt } from '../auth/oidc.js';
import type { AppEnv } from '../config.js';
import type { Executor } from '../db/knex.js';

import { AppError, NotFoundError, ValidationError } from '../errors.js';
import type { Page } from '../http/pagination.js';
import { recordAudit } from '../audit/record.js';
import { recordEvents } from '../events/record.js';
import { enqueueWalletCreation } from '../outbox/repository.js';
import { queueWalletWebhook, resendFailedWalletWebhooks } from '../webhooks/wallet-webhook.js';
import { projectKeyHash } from '../projects/keys.js';
import { findProjectAndWallet, type CallerProject } from '../tenancy/project-key.js';
import type { ProjectScope } from '../tenancy/scope.js';
import type { SignerClient } from '../signer/client.js';
import type { ProjectKeyCache } from '../tenancy/key-cache.js';
import { foldIdentity } from '../identity/fold.js';
import type { AuthFailureGuard } from '../ratelimit/auth-failures.js';
import type { ActivatedWallets, ActiveWallet } from './activated.js';
import { activateWallet, claimWallet, findWallet, findWalletForSignin, findWalletOf, listWallets, type SigninWallet, type WalletRow } from './repository.js';

export interface WalletDeps {
  db: Knex;
  signer: SignerClient;
  oidc: OidcVerifier;
  env: AppEnv;
  /** Where known project keys are answered from (see src/projects/key-cache.ts). */
  projectCache?: ProjectKeyCache;
  /** Runs once the project is known and before its JWT is verified (the project's rate limit). */
  beforeJwt?: (ctx: AppContext, project: CallerProject) => void;
  /** Every refused authentication (no or unknown project key, no or invalid JWT) counts against the client address. */
  authFailures?: AuthFailureGuard;
  /** The time of the events a wallet's creation records. */
  now: Clock;
  /** Activated wallets this process has read (activated.ts). */
  activated: ActivatedWallets;
}

export interface WalletCaller {
  project: CallerProject;
  email: string;
  token: string | null;
  requestId: string;
  /** The wallet row read with the project (sign-in): for `email` as the token claimed it before verification. */
  prefetched?: { emailLower: string; wallet: SigninWallet | undefined };
}

/** The `email` claim of a token, read without verifying it: only to prefetch, never to decide. */
const BEARER = /^Bearer ([\x21-\x7e]+)$/i;

/** A refused authentication: counted against the client address (429 past RATE_LIMIT_AUTH_FAILURES), then thrown. */
function failed(deps: WalletDeps, ctx: AppContext, err: AppError): never {
  deps.authFailures?.failed(ctx);
  throw err;
}

const missingToken = () =>
  new AppError(401, 'missing_token', 'Unauthorized', "The end user's JWT is required as Authorization: Bearer.", undefined, {
    'WWW-Authenticate': 'Bearer',
  });

/**
 * What a user endpoint can refuse from its headers alone, before it reads a body: an address over
 * its failed authentications (429), no bearer or one that is not a JWT in compact form (401,
 * counted). The signing endpoint runs it first (issue 30): its body may be 300 KiB.
 */
export function requireBearer(deps: WalletDeps, ctx: AppContext): ParsedJwt {
  deps.authFailures?.before(ctx);
  const bearer = BEARER.exec(ctx.get('Authorization'))?.[1];
  if (bearer === undefined) return failed(deps, ctx, missingToken());
  const parsed = parseJwt(bearer);
  if (parsed.problem !== undefined) return failed(deps, ctx, new InvalidTokenError(parsed.problem));
  return parsed;
}

/**
 * CONTRACT.md section 5, in its order: body (already validated) → project key present and
 * valid for this environment (400) → Authorization present (401) → the JWT against the
 * project's issuer (401). Every refusal counts as a failed authentication of the client address.
 */
export async function identifyCaller(
  deps: WalletDeps,
  body: { key?: string | undefined; token?: string | undefined; any_other_tokens?: string | undefined },
  ctx: AppContext,
  options: { prefetchWallet?: boolean } = {},
): Promise<WalletCaller> {
  const authorization = ctx.get('Authorization');
  if (body.token !== undefined && body.any_other_tokens !== undefined && body.token !== body.any_other_tokens) {
    throw new ValidationError('token and any_other_tokens are two names for one value; they differ.', [
      { in: 'body', path: '/any_other_tokens', message: 'differs from token' },
    ]);
  }
  deps.authFailures?.before(ctx);
  if (body.key === undefined)
    return failed(
      deps,
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
    return failed(
      deps,
      ctx,
      new ValidationError(
        'The project key is not valid for this environment.',
        [{ in: 'body', path: '/key', message: 'is not a valid key' }],
        'invalid_project_key',
      ),
    );
  }
  deps.beforeJwt?.(ctx, project);
  if (!bearer) return failed(deps, ctx, missingToken());
  let user: Awaited<ReturnType<OidcVerifier['verify']>>;
  try {
    user = await deps.oidc.verify(bearer, { issuer: project.issuer, requireVerifiedEmail: project.require_verified_email, tokenClaim: tokenClaimOf(project) });
  } catch (err) {
    if (err instanceof InvalidTokenError) failed(deps, ctx, err);
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

/** The wallet-created payload of the interface document; `token` only when one was given. */
export function walletCreatedPayload(w: WalletRow): Record<string, unknown> {
  return {
    walletId: w.id,
    walletAddress: w.address,
    emailAddress: w.email,
    ...(w.creation_token ? { token: w.creation_token } : {}),
  };
}

/** In the transaction that activates the wallet: its webhook delivery and its `wallet.created` event. */
async function recordWalletCreated(tx: Executor, project: CallerProject, wallet: WalletRow, at: Date): Promise<void> {
  const data = walletCreatedPayload(wallet);
  if (project.wallet_webhook_url) {
    await queueWalletWebhook(tx, { projectId: project.id, walletId: wallet.id, url: project.wallet_webhook_url, payload: JSON.stringify(data) });
  }
  await recordEvents(tx, project.id, [{ type: 'wallet.created', data, walletId: wallet.id }], at);
}

/**
 * Gives a pending wallet its key: the one stored under the row's random key id for this row's
 * request, so every caller for one identity gets the same key and a key of anyone else is a
 * conflict; only the caller whose update sets the address records the wallet-created webhook
 * and event (exactly once).
 */
export async function completeWallet(
  deps: Pick<WalletDeps, 'db' | 'signer' | 'now'>,
  project: CallerProject,
  row: WalletRow,
  requestId?: string,
): Promise<{ wallet: WalletRow; isNew: boolean }> {
  if (row.address !== null) return { wallet: row, isNew: false };
  if (row.project_id !== project.id) throw new Error('the wallet row is not of the project given');
  const key = await deps.signer.createKey(row.key_id, `wallet:${row.id}`, project.uid);
  return deps.db.transaction(async (tx) => {
    const activated = await activateWallet(tx, row.id, key.address, key.keyId);
    if (activated) {
      await recordWalletCreated(tx, project, activated, new Date(deps.now()));
      // The key creation, in the audit log: through the project's key, for this wallet.
      await recordAudit(tx, {
        organisation_id: project.organisation_id,
        project_id: project.id,
        actor: `project:${project.id}`,
        action: 'wallet.key_created',
        target: `wallet:${activated.id}`,
        status: null,
        request_id: requestId ?? null,
        details: { walletId: activated.id, walletAddress: activated.address, keyId: activated.key_id },
      });
      return { wallet: activated, isNew: true };
    }
    const current = await findWallet(tx, row.id);
    if (!current) throw new Error('wallet row vanished');
    return { wallet: current, isNew: false };
  });
}

/** `POST /signin`: the wallet, created now if needed; failed wallet webhooks of this user are re-sent. */
export async function signIn(
  deps: WalletDeps,
  caller: WalletCaller,
): Promise<{ wallet: Pick<WalletRow, 'id' | 'address' | 'email' | 'created_at'>; isNew: boolean }> {
  // The prefetched row counts only if the verified email is the one it was read for.
  const known =
    caller.prefetched && caller.prefetched.emailLower === foldIdentity(caller.email)
      ? caller.prefetched.wallet
      : await findWalletForSignin(deps.db, caller.project.id, caller.email);
  if (known?.address) {
    if (known.has_failed) await resendFailedWalletWebhooks(deps.db, known.id);
    return { wallet: known, isNew: false };
  }
  const { row } = await claimWallet(deps.db, caller.project.id, caller.email, caller.token);
  const result = await completeWallet(deps, caller.project, row, caller.requestId);
  // Committed before the answer; the relay is woken by the NOTIFY.
  await resendFailedWalletWebhooks(deps.db, result.wallet.id);
  return result;
}

/** `POST /wallets/createasync`: answered once the request is committed; the relay creates the key. */
export async function createWalletAsync(deps: WalletDeps, caller: WalletCaller): Promise<void> {
  await deps.db.transaction(async (tx) => {
    const { row } = await claimWallet(tx, caller.project.id, caller.email, caller.token);
    if (row.address === null) await enqueueWalletCreation(tx, { projectId: caller.project.id, walletId: row.id });
  });
}

/** Back-office lookup: the wallets of a project the principal can see (404 otherwise). */
export async function listProjectWallets(
  db: Executor,
  scope: ProjectScope,
  filter: { email?: string | undefined; address?: string | undefined },
  page: Page,
): Promise<WalletRow[]> {
  return listWallets(db, scope.projectId, filter, page);
}

/** An activated wallet of the scope's project (404 otherwise), from the process's kept rows when it has it (activated.ts). */
export async function getProjectWallet(deps: Pick<WalletDeps, 'activated'>, db: Executor, scope: ProjectScope, walletId: number): Promise<ActiveWallet> {
  const wallet = await deps.activated.find(db, scope.projectId, walletId);
  if (!wallet) throw new NotFoundError('No such wallet.');
  return wallet;
}

/** The signing user's own wallet (SIGNING.md): 404 `wallet_not_found` until it has one. */
export async function getUserWallet(db: Executor, caller: WalletCaller): Promise<WalletRow & { address: string }> {
  const wallet = await findWalletOf(db, caller.project.id, caller.email);
  if (!wallet || wallet.address === null)
    throw new AppError(404, 'wallet_not_found', 'Not Found', 'This user has no wallet yet: sign in first (POST /api/v1/signin).');
  return { ...wallet, address: wallet.address };
}

/** The name idempotency records and audit entries give the user present: the project and the folded e-mail. */
export const userKey = (caller: WalletCaller): string => `user:${caller.project.id}:${foldIdentity(caller.email)}`;

/** `POST /project/{id}/issuer/check`: every JWT check for a sample token, creating nothing. */
export async function checkIssuer(deps: WalletDeps, scope: ProjectScope, token: string) {
  const { project } = scope;
  const checks = await deps.oidc.diagnose(token, {
    issuer: project.issuer,
    requireVerifiedEmail: project.require_verified_email,
    tokenClaim: tokenClaimOf(project),
  });
  return { ok: checks.every((c) => c.outcome === 'passed'), issuer: project.issuer, checks };
}
