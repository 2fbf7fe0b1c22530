import { hotQuery, type Executor } from '../../platform/db/knex.js';
import { signinWalletTuple, type SigninWallet } from '../../domains/wallets/repository.js';
import type { ProjectRow } from '../../domains/projects/repository.js';
import type { ProjectKeyCache } from './key-cache.js';
import { foldIdentity } from '../identity/fold.js';
import type { AppEnv } from '../../platform/config/config.js';
import type { ProjectUid } from '../../platform/signer/client.js';

/** What a wallet request needs of its project (read on every such request, so no more). */
export type CallerProject = Pick<
  ProjectRow,
  'id' | 'uid' | 'organisation_id' | 'issuer' | 'wallet_webhook_url' | 'require_verified_email' | 'token_claim_name' | 'token_claim_value' | 'audience'
>;

/**
 * The live project a project key belongs to: key current or within its grace period, project
 * not deleted, organisation not soft-deleted, project of this deployment's environment.
 */
export async function findProjectByKeyHash(db: Executor, hash: Buffer, environment: AppEnv): Promise<CallerProject | undefined> {
  return (await findProjectAndWallet(db, hash, environment, undefined))?.project;
}

/**
 * The project of a key and, in the same query, what sign-in needs of the wallet of `email` in it
 * (when an email is given): a known user's sign-in then costs one round trip. Every request with
 * a project key runs this, so the answer is one JSON array in one column,
 * `[id, organisation_id, issuer, wallet_webhook_url, require_verified_email, wallet, key_expires_ms, uid, token_claim_name, token_claim_value, audience]`
 * with `wallet` = `[id, address, email, created_ms, has_failed]` or `null`: node-postgres decodes
 * a row description and a value per column on every execution, and one column of JSON cost it a
 * fraction of six typed ones (bench/README.md); times come as epoch milliseconds, which need no
 * date parsing. `has_failed` says a wallet-created delivery of the wallet failed.
 *
 * With `cache` (ProjectKeyCache), a key seen before is answered from it and only the wallet is
 * read (nothing at all without an email); what the database answers for a key fills it.
 */
export async function findProjectAndWallet(
  db: Executor,
  hash: Buffer,
  environment: AppEnv,
  email: string | undefined,
  cache?: ProjectKeyCache,
): Promise<{ project: CallerProject; wallet: SigninWallet | null | undefined } | undefined> {
  const keyId = cache ? hash.toString('base64') : '';
  const cached = cache?.get(keyId);
  if (cached) {
    if (email === undefined) return { project: cached, wallet: undefined };
    const rows = await hotQuery<{ wallet: WalletTuple | null }>(db, 'custody_wallet_for_signin', `SELECT ${signinWalletTuple('$1', '$2')} AS wallet`, [
      cached.id,
      foldIdentity(email),
    ]);
    return { project: cached, wallet: walletOf(rows[0]?.wallet ?? null) };
  }
  const generation = cache?.generation ?? 0;
  // node-postgres directly on knex's pool (platform/db/knex.ts hotQuery).
  const rows = await hotQuery<{ caller: CallerTuple }>(
    db,
    email === undefined ? 'custody_project_by_key' : 'custody_project_and_wallet_by_key',
    `SELECT json_build_array(p.id, p.organisation_id, p.issuer, p.wallet_webhook_url, p.require_verified_email, ${
      email === undefined ? 'NULL' : signinWalletTuple('p.id', '$3')
    }, floor(extract(epoch FROM k.expires_at) * 1000)::bigint, p.uid, p.token_claim_name, p.token_claim_value, p.audience) AS caller
       FROM project_keys k
       JOIN projects p ON p.id = k.project_id
       JOIN organisations o ON o.id = p.organisation_id
      WHERE k.key_hash = $1 AND (k.expires_at IS NULL OR k.expires_at > now())
        AND p.deleted_at IS NULL AND o.deleted_at IS NULL AND p.environment = $2`,
    email === undefined ? [hash, environment] : [hash, environment, foldIdentity(email)],
  );
  const c = rows[0]?.caller;
  if (!c) return undefined;
  const project: CallerProject = {
    id: c[0],
    uid: c[7],
    organisation_id: c[1],
    issuer: c[2],
    wallet_webhook_url: c[3],
    require_verified_email: c[4],
    token_claim_name: c[8],
    token_claim_value: c[9],
    audience: c[10],
  };
  cache?.set(keyId, project, c[6], generation);
  return { project, wallet: email === undefined ? undefined : walletOf(c[5]) };
}

const walletOf = (w: WalletTuple | null): SigninWallet | null =>
  w === null ? null : { id: w[0], address: w[1], email: w[2], created_at: new Date(w[3]), has_failed: w[4] };

type CallerTuple = [
  id: number,
  organisationId: number,
  issuer: string,
  walletWebhookUrl: string | null,
  requireVerifiedEmail: boolean,
  wallet: WalletTuple | null,
  keyExpiresMs: number | null,
  uid: ProjectUid,
  tokenClaimName: string | null,
  tokenClaimValue: string | null,
  audience: string | null,
];
type WalletTuple = [id: number, address: string | null, email: string, createdMs: number, hasFailed: boolean];

/** The project background work acts for (a queued wallet creation), by id: deleted ones too, so the work can tell. */
export async function projectForWork(db: Executor, id: number): Promise<(CallerProject & { deleted_at: Date | null }) | undefined> {
  const row: (CallerProject & { deleted_at: Date | null }) | undefined = await db('projects')
    .where({ id })
    .first(
      'id',
      'uid',
      'organisation_id',
      'issuer',
      'wallet_webhook_url',
      'require_verified_email',
      'token_claim_name',
      'token_claim_value',
      'audience',
      'deleted_at',
    );
  return row;
}
