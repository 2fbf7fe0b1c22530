import { hotQuery, type Executor } from '../../platform/db/knex.js';
import { foldIdentity } from '../../access/identity/fold.js';
import { isUniqueViolation } from '../../platform/db/pg-errors.js';
import { KeyConflictError } from '../../platform/http/errors.js';
import { hasFailedWalletDelivery } from '../../platform/outbox/repository.js';

export interface WalletRow {
  id: number;
  project_id: number;
  email: string;
  email_lower: string;
  address: string | null;
  /** Random, chosen when the row is inserted (before the signer is called); the key is stored under it. */
  key_id: string;
  creation_token: string | null;
  created_at: Date;
  activated_at: Date | null;
}

/** The wallet row of this identity, inserting a pending one if none exists (the unique constraint decides). */
export async function claimWallet(db: Executor, projectId: number, email: string, token: string | null): Promise<{ row: WalletRow; inserted: boolean }> {
  const { rows } = await db.raw<{ rows: WalletRow[] }>(
    `INSERT INTO wallets (project_id, email, email_lower, creation_token) VALUES (?, ?, ?, ?)
     ON CONFLICT (project_id, email_lower) DO NOTHING RETURNING *`,
    [projectId, email, foldIdentity(email), token],
  );
  if (rows[0]) return { row: rows[0], inserted: true };
  const row = await db<WalletRow>('wallets')
    .where({ project_id: projectId, email_lower: foldIdentity(email) })
    .first();
  if (!row) throw new Error('wallet row vanished after a conflict');
  return { row, inserted: false };
}

/** What sign-in needs of a known user's wallet: what it answers with, and whether a wallet-created delivery of it failed. */
export type SigninWallet = Pick<WalletRow, 'id' | 'address' | 'email' | 'created_at'> & { has_failed: boolean };

/** The sign-in fast path for a known user: the wallet and whether it has failed wallet deliveries to re-send, in one query. */
export async function findWalletForSignin(db: Executor, projectId: number, email: string): Promise<SigninWallet | undefined> {
  const { rows } = await db.raw<{ rows: SigninWallet[] }>(
    `SELECT w.id, w.address, w.email, w.created_at,
            ${hasFailedWalletDelivery('w.id')} AS has_failed
       FROM wallets w WHERE w.project_id = ? AND w.email_lower = ?`,
    [projectId, foldIdentity(email)],
  );
  return rows[0];
}

/**
 * SQL: what sign-in reads of the wallet of project `projectId` and folded e-mail `emailLower` (SQL
 * expressions, a parameter or a column) as one JSON array `[id, address, email, created_ms,
 * has_failed]`, or NULL when there is none; for the project-key statement that composes it
 * (access/tenancy/project-key.ts).
 */
export const signinWalletTuple = (projectId: string, emailLower: string): string =>
  `(SELECT json_build_array(w.id, w.address, w.email, floor(extract(epoch FROM w.created_at) * 1000)::bigint, ${hasFailedWalletDelivery('w.id')})
      FROM wallets w WHERE w.project_id = ${projectId} AND w.email_lower = ${emailLower})`;

/** SQL: the key id of the wallet whose id is `walletId` (a column); for a statement that composes it. */
export const walletKeyIdOf = (walletId: string): string => `(SELECT w.key_id FROM wallets w WHERE w.id = ${walletId})`;

/** Sets the address once: only the caller whose update matched gets the row back. */
export async function activateWallet(db: Executor, walletId: number, address: string, keyId: string): Promise<WalletRow | undefined> {
  try {
    const [row] = await db<WalletRow>('wallets')
      .where({ id: walletId, key_id: keyId })
      .whereNull('address')
      .update({ address, activated_at: db.fn.now() as unknown as Date })
      .returning('*');
    return row;
  } catch (err) {
    // Another wallet already has this address: the signer handed out a key twice.
    if (isUniqueViolation(err)) throw new KeyConflictError('key_conflict', `address ${address} already belongs to another wallet`);
    throw err;
  }
}

/** The wallet of an identity of a project (the user present), however its e-mail was cased. */
export async function findWalletOf(db: Executor, projectId: number, email: string): Promise<WalletRow | undefined> {
  return db<WalletRow>('wallets')
    .where({ project_id: projectId, email_lower: foldIdentity(email) })
    .first();
}

export async function findWallet(db: Executor, walletId: number): Promise<WalletRow | undefined> {
  return db<WalletRow>('wallets').where({ id: walletId }).first();
}

/** A wallet's columns, named (as a prepared statement needs them). */
const WALLET_COLUMNS = [
  'id',
  'project_id',
  'email',
  'email_lower',
  'address',
  'key_id',
  'creation_token',
  'created_at',
  'activated_at',
] as const satisfies ReadonlyArray<keyof WalletRow>;

/** A wallet of this project, by id: every signature by a customer's backend reads it (a prepared statement, platform/db/knex.ts). */
export async function findProjectWallet(db: Executor, projectId: number, walletId: number): Promise<WalletRow | undefined> {
  const rows = await hotQuery<WalletRow>(db, 'custody_project_wallet', `SELECT ${WALLET_COLUMNS.join(', ')} FROM wallets WHERE id = $1 AND project_id = $2`, [
    walletId,
    projectId,
  ]);
  return rows[0];
}

export async function listWallets(
  db: Executor,
  projectId: number,
  filter: { email?: string | undefined; address?: string | undefined },
  page: { afterId: number; limit: number },
): Promise<WalletRow[]> {
  const q = db<WalletRow>('wallets').where('project_id', projectId).whereNotNull('address').where('id', '>', page.afterId);
  if (filter.email !== undefined) q.where('email_lower', foldIdentity(filter.email));
  if (filter.address !== undefined) q.whereRaw('lower(address) = ?', [filter.address.toLowerCase()]);
  return q.orderBy('id').limit(page.limit + 1);
}
