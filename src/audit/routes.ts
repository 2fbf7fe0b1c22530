import type Router from '@koa/router';
import { principalOf, requireAdmin } from '../auth/access.js';
import { NotFoundError } from '../errors.js';
import type { AppState } from '../http/context.js';
import type { RouteDeps } from '../http/route-deps.js';
import { Id, PageQuery, strictObject } from '../http/schemas.js';
import { endpoint } from '../http/validate.js';
import { findOrganisation } from '../organisations/repository.js';
import { listAudit, presentAudit } from './audit.js';

/** `GET /organisations/{id}/audit`: the organisation's audit log, for its admins and the operator. */
export function auditRoutes(router: Router<AppState>, { authenticate, cursors }: RouteDeps): void {
  router.get(
    '/api/v1/organisations/:id/audit',
    authenticate,
    endpoint({ params: strictObject({ id: Id }), query: strictObject({ ...PageQuery }) }, async (ctx, { params, query }) => {
      const p = principalOf(ctx);
      const organisationId = Number(params.id);
      // Another tenant (and any project token) does not see the organisation: 404; a read token: 403.
      if (!(await findOrganisation(ctx.state.db, p, organisationId, { includeDeleted: true }))) throw new NotFoundError('No such organisation.');
      requireAdmin(p);
      const list = `audit:${organisationId}`;
      const page = cursors.page(list, query);
      const result = cursors.result(list, page, await listAudit(ctx.state.db, organisationId, page));
      ctx.body = { entries: result.items.map(presentAudit), nextCursor: result.nextCursor };
    }),
  );
}
