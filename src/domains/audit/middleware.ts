import { principalKey } from '../../access/auth/principal.js';
import type { AppContext, AppMiddleware } from '../../platform/http/context.js';
import type { AuditTarget, Route } from '../../access/endpoints/declare.js';
import { recordAudit } from './record.js';

/** The entry's tenant: the scope the request resolved, or the organisation it created. */
function tenantOf(ctx: AppContext, target: AuditTarget, answer: Record<string, unknown>): { organisationId: number | null; projectId: number | null } {
  const scope = ctx.state.scope;
  if (scope?.level === 'project') return { organisationId: scope.organisationId, projectId: scope.projectId };
  if (scope?.level === 'organisation') return { organisationId: scope.organisationId, projectId: null };
  const created = typeof target === 'object' && 'organisation' in target ? answer['id'] : undefined;
  return { organisationId: typeof created === 'number' ? created : null, projectId: null };
}

function targetOf(ctx: AppContext, target: AuditTarget, answer: Record<string, unknown>): string | null {
  if (target === 'none') return null;
  const value = 'param' in target ? ctx.params[target.param] : answer[target.answer];
  return typeof value === 'string' || typeof value === 'number' ? String(value) : null;
}

/**
 * For every management write: runs the rest of the request in a transaction and, when it
 * succeeds, records who did what in that same transaction, so the change and its audit entry
 * commit together or not at all; an Idempotency-Key answer is stored in it too. The transaction
 * is the request's one connection: the handler works through `ctx.state.db` only. Tenant and
 * target come from the endpoint's declaration and its resolved scope, never from the path.
 */
export function audited(route: Route, target: AuditTarget): AppMiddleware {
  const action = `${route.method} ${route.path}`;
  return async (ctx, next) => {
    const outer = ctx.state.db;
    await outer.transaction(async (tx) => {
      ctx.state.db = tx;
      try {
        await next();
      } finally {
        ctx.state.db = outer;
      }
      const principal = ctx.state.principal;
      if (ctx.status < 400 && principal) {
        const answer = (typeof ctx.body === 'object' && ctx.body !== null ? ctx.body : {}) as Record<string, unknown>;
        const { organisationId, projectId } = tenantOf(ctx, target, answer);
        await recordAudit(tx, {
          organisation_id: organisationId,
          project_id: projectId,
          actor: principalKey(principal),
          action,
          target: targetOf(ctx, target, answer),
          status: ctx.status,
          request_id: ctx.state.requestId,
          details: { params: { ...ctx.params }, ...(ctx.query['projectId'] === undefined ? {} : { projectId: String(ctx.query['projectId']) }) },
        });
      }
      await ctx.state.idempotentAnswer?.storeIn(tx);
    });
  };
}
