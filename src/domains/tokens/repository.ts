import { hotQuery, keyedRows, pgArray, type Executor } from '../../platform/db/knex.js';
import type { TokenRole } from '../../access/auth/principal.js';
import type { Page } from '../../platform/http/pagination.js';
import type { ProjectRow } from '../projects/repository.js';
import { PROJECT_COLUMNS, tokenReach } from '../../access/tenancy/visible.js';

export interface ApiTokenRow {
  id: number;
  organisation_id: number;
  project_id: number | null;
  name: string;
  role: TokenRole;
  created_by: string;
  created_at: Date;
  revoked_at: Date | null;
}

const COLUMNS = ['id', 'organisation_id', 'project_id', 'name', 'role', 'created_by', 'created_at', 'revoked_at'];

/** What authenticating a request needs of its token. */
export type LiveToken = Pick<ApiTokenRow, 'id' | 'organisation_id' | 'project_id' | 'role'>;

type TokenAndProject = LiveToken & { [C in (typeof PROJECT_COLUMNS)[number] as `p_${C}`]: ProjectRow[C] | null };

/** A token to look up: its hash, and the project its request names (or null). */
export interface TokenLookup {
  hash: Buffer;
  projectId: number | null;
}

/**
 * Each token by its hash, if it is live: not revoked, its organisation not soft-deleted and, for a
 * project token, its project not deleted (docs/interface.md section 10: undelete brings it back).
 * With the project its request names, in the same round trip, that project if the token reaches
 * it (access/tenancy/visible.ts), else null. Every API-token request runs it, with the others that
 * arrive meanwhile (access/auth/authenticate.ts): one prepared statement (platform/db/knex.ts
 * hotQuery) for all of them. Answers in the lookups' order.
 */
const reach = tokenReach('t', 'k.project', 'np');
const LIVE_TOKENS_SQL = `
  SELECT k.ord, t.id, t.organisation_id, t.project_id, t.role, ${PROJECT_COLUMNS.map((c) => `np.${c} AS p_${c}`).join(', ')}
    FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS k(hash, project, ord)
    JOIN api_tokens t ON t.token_hash = decode(k.hash, 'hex')
    ${reach.joins}
   WHERE ${keyedRows('k.ord')} AND t.revoked_at IS NULL AND ${reach.live}`;

export async function findLiveTokensByHash(
  db: Executor,
  lookups: readonly TokenLookup[],
): Promise<Array<{ token: LiveToken; project: ProjectRow | null } | undefined>> {
  const rows = await hotQuery<TokenAndProject & { ord: string }>(db, 'custody_live_tokens', LIVE_TOKENS_SQL, [
    pgArray(lookups.map((l) => l.hash.toString('hex'))),
    pgArray(lookups.map((l) => l.projectId)),
  ]);
  const found = new Map(rows.map((r) => [Number(r.ord), r]));
  return lookups.map((_, i) => {
    const row = found.get(i + 1);
    if (!row) return undefined;
    const token: LiveToken = { id: row.id, organisation_id: row.organisation_id, project_id: row.project_id, role: row.role };
    if (row.p_id === null) return { token, project: null };
    return { token, project: Object.fromEntries(PROJECT_COLUMNS.map((c) => [c, row[`p_${c}`]])) as unknown as ProjectRow };
  });
}

export async function insertToken(
  db: Executor,
  values: { organisationId: number; projectId: number | null; name: string; role: TokenRole; hash: Buffer; createdBy: string },
): Promise<ApiTokenRow> {
  const [row] = await db<ApiTokenRow & { token_hash: Buffer }>('api_tokens')
    .insert({
      organisation_id: values.organisationId,
      project_id: values.projectId,
      name: values.name,
      role: values.role,
      token_hash: values.hash,
      created_by: values.createdBy,
    })
    .returning(COLUMNS as Array<keyof ApiTokenRow>);
  if (!row) throw new Error('insert returned no row');
  return row;
}

export async function listTokens(db: Executor, organisationId: number, page: Page, showRevoked: boolean): Promise<ApiTokenRow[]> {
  const q = db<ApiTokenRow>('api_tokens').where('organisation_id', organisationId).where('id', '>', page.afterId);
  if (!showRevoked) q.whereNull('revoked_at');
  return q
    .orderBy('id')
    .limit(page.limit + 1)
    .select(COLUMNS as Array<keyof ApiTokenRow>);
}

/** Revokes at once; revoking a revoked token again leaves its first revocation time. */
export async function revokeToken(db: Executor, organisationId: number, tokenId: number): Promise<boolean> {
  const found: unknown = await db('api_tokens').where({ organisation_id: organisationId, id: tokenId }).first('id', 'revoked_at');
  if (!found) return false;
  await db('api_tokens').where({ id: tokenId }).whereNull('revoked_at').update({ revoked_at: db.fn.now() });
  return true;
}
