import type { Principal } from '../auth/principal.js';
import { principalKey } from '../auth/principal.js';
import type { Executor } from '../db/knex.js';
import type { AppContext, AppMiddleware } from '../http/context.js';
import type { Page } from '../http/pagination.js';

export interface AuditRow {
  id: number;
  at: Date;
  organisation_id: number | null;
  project_id: number | null;
  actor: string;
  action: string;
  target: string | null;
  status: number | null;
  request_id: string | null;
  details: Record<string, unknown>;
}

export async function recordAudit(db: Executor, row: Omit<AuditRow, 'id' | 'at'>): Promise<void> {
  await db('audit_log').insert({ ...row, details: JSON.stringify(row.details) });
}

/** The route pattern koa-router matched (`/api/v1/project/:projectId`), never the raw path. */
const routeOf = (ctx: AppContext): string => {
  const r = (ctx as { _matchedRoute?: unknown })._matchedRoute;
  return typeof r === 'string' ? r : ctx.path;
};

const idOf = (v: unknown): number | undefined => (typeof v === 'string' && /^[1-9][0-9]{0,14}$/.test(v) ? Number(v) : typeof v === 'number' ? v : undefined);

/** The organisation and project a management write concerns, from its path, query, principal or answer. */
async function scopeOf(db: Executor, ctx: AppContext, p: Principal): Promise<{ organisationId: number | null; projectId: number | null }> {
  const params = ctx.params as Record<string, string | undefined>;
  const body = (typeof ctx.body === 'object' && ctx.body !== null ? ctx.body : {}) as Record<string, unknown>;
  const projectId = idOf(params['projectId']) ?? idOf(ctx.query['projectId']) ?? (p.scope === 'project' ? p.projectId : undefined) ?? null;
  if (p.scope !== 'operator') return { organisationId: p.organisationId, projectId };
  if (projectId !== null) {
    const { rows } = await db.raw<{ rows: Array<{ organisation_id: number }> }>('SELECT organisation_id FROM projects WHERE id = ?', [projectId]);
    const row = rows[0];
    return { organisationId: row?.organisation_id ?? null, projectId };
  }
  const route = routeOf(ctx);
  if (route.startsWith('/api/v1/organisations/:id')) return { organisationId: idOf(params['id']) ?? null, projectId: null };
  if (route === '/api/v1/organisations') return { organisationId: idOf(body['id']) ?? null, projectId: null };
  return { organisationId: null, projectId: null };
}

/**
 * For every management write: runs the rest of the request in a transaction (a savepoint inside
 * the idempotency middleware's, when there is one) and, when it succeeds, records who did what in
 * that same transaction, so the change and its audit entry commit together or not at all.
 */
export function audited(): AppMiddleware {
  return async (ctx, next) => {
    const outer = ctx.state.db;
    await outer.transaction(async (tx) => {
      ctx.state.db = tx;
      try {
        await next();
      } finally {
        ctx.state.db = outer;
      }
      if (ctx.status >= 400) return;
      const principal = ctx.state.principal;
      if (!principal) return;
      const { organisationId, projectId } = await scopeOf(tx, ctx, principal);
      const body = (typeof ctx.body === 'object' && ctx.body !== null ? ctx.body : {}) as Record<string, unknown>;
      const target = idOf(body['id']) ?? (typeof body['tokenId'] === 'string' ? body['tokenId'] : undefined);
      await recordAudit(tx, {
        organisation_id: organisationId,
        project_id: projectId,
        actor: principalKey(principal),
        action: `${ctx.method} ${routeOf(ctx)}`,
        target: target === undefined ? null : String(target),
        status: ctx.status,
        request_id: ctx.state.requestId,
        details: { params: { ...ctx.params }, ...(ctx.query['projectId'] === undefined ? {} : { projectId: String(ctx.query['projectId']) }) },
      });
    });
  };
}

export async function listAudit(db: Executor, organisationId: number, page: Page): Promise<AuditRow[]> {
  return await db<AuditRow>('audit_log')
    .where('organisation_id', organisationId)
    .where('id', '>', page.afterId)
    .orderBy('id')
    .limit(page.limit + 1);
}

export const presentAudit = (r: AuditRow) => ({
  id: r.id,
  at: r.at.toISOString(),
  organisationId: r.organisation_id,
  projectId: r.project_id,
  actor: r.actor,
  action: r.action,
  target: r.target,
  status: r.status,
  requestId: r.request_id,
  details: r.details,
});
