import type { Executor } from '../../platform/db/knex.js';
import type { AppEnv } from '../../platform/config/config.js';
import type { Page } from '../../platform/http/pagination.js';
import type { ProjectUid } from '../../platform/signer/client.js';

export interface ProjectRow {
  id: number;
  /**
   * The project's random identity, drawn by the database at insert and never changed: what the
   * signer knows the project by (the numeric id comes from a sequence, which repeats after a restore).
   */
  uid: ProjectUid;
  organisation_id: number;
  name: string;
  environment: AppEnv;
  issuer: string;
  wallet_webhook_url: string | null;
  wallet_webhook_secret_enc: string;
  wallet_webhook_secret_prev_enc: string | null;
  wallet_webhook_secret_prev_expires_at: Date | null;
  require_verified_email: boolean;
  /** A claim users' JWTs must carry (domains/projects/issuer-binding.ts); both null when none. */
  token_claim_name: string | null;
  /** The audience its user tokens carry; null: the service's. */
  audience: string | null;
  token_claim_value: string | null;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

/** By id, locked for a change in the caller's transaction (the scope was resolved before: tenancy/). */
export async function lockProject(db: Executor, id: number): Promise<ProjectRow | undefined> {
  return (await db('projects').where('id', id).forUpdate().first()) as ProjectRow | undefined;
}

/** By id alone, for the relay's internal work (never for a request: those resolve their scope in tenancy/). */
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

export async function insertProject(db: Executor, values: Omit<ProjectRow, 'uid' | 'created_at' | 'updated_at' | 'deleted_at'>): Promise<ProjectRow> {
  const [row] = await db<ProjectRow>('projects').insert(values).returning('*');
  if (!row) throw new Error('insert returned no row');
  return row;
}

export async function updateProject(db: Executor, id: number, values: Partial<Omit<ProjectRow, 'id' | 'uid'>>): Promise<ProjectRow> {
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

/** A project's wallet webhook: where wallet-created deliveries go and the secrets that sign them. */
export interface WalletWebhook {
  id: number;
  wallet_webhook_url: string | null;
  wallet_webhook_secret_enc: string;
  wallet_webhook_secret_prev_enc: string | null;
  wallet_webhook_secret_prev_expires_at: Date | null;
  deleted_at: Date | null;
}

export async function findWalletWebhook(db: Executor, projectId: number): Promise<WalletWebhook | undefined> {
  const row: WalletWebhook | undefined = await db('projects')
    .where('id', projectId)
    .first('id', 'wallet_webhook_url', 'wallet_webhook_secret_enc', 'wallet_webhook_secret_prev_enc', 'wallet_webhook_secret_prev_expires_at', 'deleted_at');
  return row;
}

/** SQL: the uid of the project whose id is `projectId` (a column); for a statement that composes it. */
export const projectUidOf = (projectId: string): string => `(SELECT p.uid FROM projects p WHERE p.id = ${projectId})`;
