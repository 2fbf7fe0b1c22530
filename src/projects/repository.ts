import { hotQuery, type Executor, type Knex } from '../db/knex.js';
import type { Principal } from '../auth/principal.js';
import type { SigninWallet } from '../wallets/repository.js';
import type { ProjectKeyCache } from './key-cache.js';
import { foldIdentity } from '../identity/fold.js';
import type { AppEnv } from '../config.js';
import type { Page } from '../http/pagination.js';

export interface ProjectRow {
  id: number;
  organisation_id: number;
  name: string;
  environment: AppEnv;
  issuer: string;
  wallet_webhook_url: string | null;
  wallet_webhook_secret_enc: string;
  wallet_webhook_secret_prev_enc: string | null;
  wallet_webhook_secret_prev_expires_at: Date | null;
  require_verified_email: boolean;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

/**
 * Every project query starts here: live projects of live organisations, narrowed to what the
 * principal may see, so another tenant's project is simply not found (404).
 */
export function projectsInScope(db: Executor, p: Principal): Knex.QueryBuilder {
  const q = db('projects as p').join('organisations as o', 'o.id', 'p.organisation_id').whereNull('o.deleted_at').select('p.*');
  if (p.scope === 'organisation') q.where('p.organisation_id', p.organisationId);
  if (p.scope === 'project') q.where('p.id', p.projectId);
  return q;
}

export async function findProject(db: Executor, p: Principal, id: number, forUpdate = false): Promise<ProjectRow | undefined> {
  const q = projectsInScope(db, p).where('p.id', id).whereNull('p.deleted_at');
  if (forUpdate) q.forUpdate('p');
  return (await q.first()) as ProjectRow | undefined;
}

/** By id alone, for the relay's internal work (never for a request: those start from projectsInScope). */
export async function findProjectById(db: Executor, id: number): Promise<ProjectRow | undefined> {
  return db<ProjectRow>('projects').where({ id }).first();
}

export async function listProjects(db: Executor, organisationId: number, page: Page, showDeleted: boolean): Promise<ProjectRow[]> {
  const q = db('projects').where('organisation_id', organisationId).where('id', '>', page.afterId);
  if (!showDeleted) q.whereNull('deleted_at');
  return (await q.orderBy('id').limit(page.limit + 1)) as ProjectRow[];
}

export async function nextProjectId(db: Executor): Promise<number> {
  const { rows } = await db.raw<{ rows: Array<{ id: number }> }>(`SELECT nextval(pg_get_serial_sequence('projects', 'id')) AS id`);
  const id = rows[0]?.id;
  if (id === undefined) throw new Error('no id from the projects sequence');
  return id;
}

export async function insertProject(db: Executor, values: Omit<ProjectRow, 'created_at' | 'updated_at' | 'deleted_at'>): Promise<ProjectRow> {
  const [row] = await db<ProjectRow>('projects').insert(values).returning('*');
  if (!row) throw new Error('insert returned no row');
  return row;
}

export async function updateProject(db: Executor, id: number, values: Partial<ProjectRow>): Promise<ProjectRow> {
  const [row] = await db<ProjectRow>('projects')
    .where('id', id)
    .update({ ...values, updated_at: db.fn.now() as unknown as Date })
    .returning('*');
  if (!row) throw new Error('update returned no row');
  return row;
}

export async function insertProjectKey(db: Executor, projectId: number, hash: Buffer): Promise<void> {
  await db('project_keys').insert({ project_id: projectId, key_hash: hash });
}

/** Keys still valid now end at `graceSeconds` from now (or earlier, if they already end sooner). */
export async function expireProjectKeys(db: Executor, projectId: number, graceSeconds: number): Promise<Date> {
  const { rows } = await db.raw<{ rows: Array<{ until: Date }> }>(`SELECT now() + make_interval(secs => ?) AS until`, [graceSeconds]);
  const until = rows[0]?.until;
  if (!until) throw new Error('no time from the database');
  await db('project_keys').where('project_id', projectId).whereRaw('(expires_at IS NULL OR expires_at > ?)', [until]).update({ expires_at: until });
  return until;
}

/** What a wallet request needs of its project (read on every such request, so no more). */
export type CallerProject = Pick<ProjectRow, 'id' | 'organisation_id' | 'issuer' | 'wallet_webhook_url' | 'require_verified_email'>;

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
 * `[id, organisation_id, issuer, wallet_webhook_url, require_verified_email, wallet, key_expires_ms]`
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
    const rows = await hotQuery<{ wallet: WalletTuple | null }>(
      db,
      'custody_wallet_for_signin',
      `SELECT ${WALLET_TUPLE} AS wallet FROM wallets w WHERE w.project_id = $1 AND w.email_lower = $2`,
      [cached.id, foldIdentity(email)],
    );
    return { project: cached, wallet: walletOf(rows[0]?.wallet ?? null) };
  }
  const generation = cache?.generation ?? 0;
  // node-postgres directly on knex's pool (db/knex.ts hotQuery).
  const rows = await hotQuery<{ caller: CallerTuple }>(
    db,
    email === undefined ? 'custody_project_by_key' : 'custody_project_and_wallet_by_key',
    `SELECT json_build_array(p.id, p.organisation_id, p.issuer, p.wallet_webhook_url, p.require_verified_email, ${
      email === undefined ? 'NULL' : `(SELECT ${WALLET_TUPLE} FROM wallets w WHERE w.project_id = p.id AND w.email_lower = $3)`
    }, floor(extract(epoch FROM k.expires_at) * 1000)::bigint) AS caller
       FROM project_keys k
       JOIN projects p ON p.id = k.project_id
       JOIN organisations o ON o.id = p.organisation_id
      WHERE k.key_hash = $1 AND (k.expires_at IS NULL OR k.expires_at > now())
        AND p.deleted_at IS NULL AND o.deleted_at IS NULL AND p.environment = $2`,
    email === undefined ? [hash, environment] : [hash, environment, foldIdentity(email)],
  );
  const c = rows[0]?.caller;
  if (!c) return undefined;
  const project: CallerProject = { id: c[0], organisation_id: c[1], issuer: c[2], wallet_webhook_url: c[3], require_verified_email: c[4] };
  cache?.set(keyId, project, c[6], generation);
  return { project, wallet: email === undefined ? undefined : walletOf(c[5]) };
}

/** What sign-in reads of a wallet, as one JSON array (see findProjectAndWallet). */
const WALLET_TUPLE = `json_build_array(w.id, w.address, w.email, floor(extract(epoch FROM w.created_at) * 1000)::bigint,
  EXISTS (SELECT 1 FROM outbox o WHERE o.wallet_id = w.id AND o.kind = 'delivery' AND o.status = 'failed'))`;

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
];
type WalletTuple = [id: number, address: string | null, email: string, createdMs: number, hasFailed: boolean];
