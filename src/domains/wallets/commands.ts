import { tokenClaimOf } from '../projects/issuer-binding.js';
import type { Clock } from '../../platform/runtime/clock.js';
import type { Knex } from 'knex';
import type { OidcVerifier } from '../../access/auth/oidc.js';
import type { Executor } from '../../platform/db/knex.js';

import { AppError, NotFoundError } from '../../platform/http/errors.js';
import type { Page } from '../../platform/http/pagination.js';
import { recordAudit } from '../audit/record.js';
import { recordEvents } from '../webhooks/record.js';
import { enqueueWalletCreation } from '../../platform/outbox/repository.js';
import { queueWalletWebhook, resendFailedWalletWebhooks } from '../webhooks/wallet-webhook.js';
import type { CallerProject } from '../../access/tenancy/project-key.js';
import type { ProjectScope } from '../../access/tenancy/scope.js';
import type { SignerClient } from '../../platform/signer/client.js';
import { foldIdentity } from '../../access/identity/fold.js';
import type { UserCaller } from '../../access/auth/user.js';
import type { ActivatedWallets, ActiveWallet } from './activated.js';
import { activateWallet, claimWallet, findWallet, findWalletForSignin, findWalletOf, listWallets, type WalletRow } from './repository.js';

export interface WalletDeps {
  db: Knex;
  signer: SignerClient;
  /** For the issuer diagnostic. */
  oidc: OidcVerifier;
  /** The time of the events a wallet's creation records. */
  now: Clock;
  /** Activated wallets this process has read (activated.ts). */
  activated: ActivatedWallets;
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
  caller: UserCaller,
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
export async function createWalletAsync(deps: WalletDeps, caller: UserCaller): Promise<void> {
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

/** The signing user's own wallet (docs/signing.md): 404 `wallet_not_found` until it has one. */
export async function getUserWallet(db: Executor, caller: UserCaller): Promise<WalletRow & { address: string }> {
  const wallet = await findWalletOf(db, caller.project.id, caller.email);
  if (!wallet || wallet.address === null)
    throw new AppError(404, 'wallet_not_found', 'Not Found', 'This user has no wallet yet: sign in first (POST /api/v1/signin).');
  return { ...wallet, address: wallet.address };
}

/** `POST /project/{id}/issuer/check`: every JWT check for a sample token, creating nothing. */
export async function checkIssuer(deps: WalletDeps, scope: ProjectScope, token: string) {
  const { project } = scope;
  const checks = await deps.oidc.diagnose(token, {
    issuer: project.issuer,
    requireVerifiedEmail: project.require_verified_email,
    tokenClaim: tokenClaimOf(project),
    audience: project.audience,
  });
  return { ok: checks.every((c) => c.outcome === 'passed'), issuer: project.issuer, checks };
}

/** An activated wallet by id, for background work that signs with it (a send's fee bump, a gap fill): no tenant scope there, the work names its own wallet. */
export async function walletById(db: Executor, walletId: number): Promise<ActiveWallet | undefined> {
  const row = await findWallet(db, walletId);
  return row?.address ? { ...row, address: row.address } : undefined;
}
