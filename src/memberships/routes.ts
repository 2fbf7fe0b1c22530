import type Router from '@koa/router';
import { principalOf } from '../auth/access.js';
import type { AppState } from '../http/context.js';
import type { RouteDeps } from '../http/route-deps.js';
import { queryBool } from '../http/schemas.js';
import { endpoint } from '../http/validate.js';
import { issueMemberships, membershipProject, revokeMembershipCommand, transferMembership, viewProjectMemberships } from './commands.js';
import { presentMembership } from './presenter.js';
import { IssueBody, ProjectQuery, RevokeBody, TransferBody, ViewQuery } from './schemas.js';

/** The four membership endpoints of the interface document, with CONTRACT.md section 7. */
export function membershipRoutes(router: Router<AppState>, { authenticate, audited, idempotent, cursors, now }: RouteDeps): void {
  const seconds = (ms: number) => Math.floor(ms / 1000);

  router.post(
    '/api/v1/membership/issue',
    authenticate,
    idempotent,
    audited,
    endpoint({ query: ProjectQuery, body: IssueBody }, async (ctx, { query, body }) => {
      const project = await membershipProject(ctx.state.db, principalOf(ctx), query.projectId, true);
      const at = now();
      const rows = await issueMemberships(ctx.state.db, project, body, at);
      ctx.status = 201;
      ctx.body = { memberships: rows.map((m) => presentMembership(m, seconds(at))) };
    }),
  );

  router.post(
    '/api/v1/membership/revoke',
    authenticate,
    idempotent,
    audited,
    endpoint({ query: ProjectQuery, body: RevokeBody }, async (ctx, { query, body }) => {
      const project = await membershipProject(ctx.state.db, principalOf(ctx), query.projectId, true);
      const at = now();
      const row = await revokeMembershipCommand(ctx.state.db, project, body, at);
      if (row === null) {
        ctx.status = 204;
        return;
      }
      ctx.body = presentMembership(row, seconds(at));
    }),
  );

  router.post(
    '/api/v1/membership/transfer',
    authenticate,
    idempotent,
    audited,
    endpoint({ query: ProjectQuery, body: TransferBody }, async (ctx, { query, body }) => {
      const project = await membershipProject(ctx.state.db, principalOf(ctx), query.projectId, true);
      const at = now();
      ctx.body = presentMembership(await transferMembership(ctx.state.db, project, body, at), seconds(at));
    }),
  );

  router.get(
    '/api/v1/membership/view',
    authenticate,
    endpoint({ query: ViewQuery }, async (ctx, { query }) => {
      const project = await membershipProject(ctx.state.db, principalOf(ctx), query.projectId, false);
      const nowS = seconds(now());
      const filter = {
        walletAddress: query.walletAddress,
        membershipType: query.membershipType,
        includeRevoked: queryBool(query.includeRevoked),
        includeExpired: queryBool(query.includeExpired),
      };
      // The cursor is bound to the project and the filters it was made for.
      const list = `memberships:${project.id}:${(filter.walletAddress ?? '').toLowerCase()}:${filter.membershipType ?? ''}:${filter.includeRevoked}:${filter.includeExpired}`;
      const page = cursors.page(list, query);
      const result = cursors.result(list, page, await viewProjectMemberships(ctx.state.db, project, filter, nowS, page));
      ctx.body = { memberships: result.items.map((m) => presentMembership(m, nowS)), nextCursor: result.nextCursor };
    }),
  );
}
