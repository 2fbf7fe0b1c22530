import { likeLiteral, type Executor } from '../../platform/db/knex.js';
import { visibleOrganisations } from '../../access/tenancy/visible.js';
import type { Principal } from '../../access/auth/principal.js';
import type { Page } from '../../platform/http/pagination.js';

export interface OrganisationRow {
  id: number;
  name: string;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

/** By id, locked for a change in the caller's transaction (the scope was resolved before: tenancy/). */
export async function lockOrganisation(db: Executor, id: number): Promise<OrganisationRow | undefined> {
  return (await db('organisations').where('id', id).forUpdate().first()) as OrganisationRow | undefined;
}

export async function listOrganisations(db: Executor, p: Principal, page: Page, showDeleted: boolean, name?: string): Promise<OrganisationRow[]> {
  const q = visibleOrganisations(db, p).where('id', '>', page.afterId);
  if (!showDeleted) q.whereNull('deleted_at');
  if (name !== undefined) q.whereILike('name', `%${likeLiteral(name)}%`);
  return (await q.orderBy('id').limit(page.limit + 1)) as OrganisationRow[];
}

export async function insertOrganisation(db: Executor, name: string): Promise<OrganisationRow> {
  const [row] = await db<OrganisationRow>('organisations').insert({ name }).returning('*');
  if (!row) throw new Error('insert returned no row');
  return row;
}

export async function updateOrganisation(db: Executor, id: number, changes: { name?: string; deleted?: boolean }): Promise<OrganisationRow> {
  const values: Record<string, unknown> = { updated_at: db.fn.now() };
  if (changes.name !== undefined) values['name'] = changes.name;
  if (changes.deleted !== undefined) values['deleted_at'] = changes.deleted ? db.fn.now() : null;
  const [row] = await db<OrganisationRow>('organisations').where('id', id).update(values).returning('*');
  if (!row) throw new Error('update returned no row');
  return row;
}
