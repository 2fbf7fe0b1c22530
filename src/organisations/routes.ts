import type Router from '@koa/router';
import { principalOf } from '../auth/access.js';
import type { AppState } from '../http/context.js';
import type { RouteDeps } from '../http/route-deps.js';
import { queryBool } from '../http/schemas.js';
import { endpoint } from '../http/validate.js';
import {
  createOrganisation,
  deleteOrganisation,
  getOrganisation,
  listVisibleOrganisations,
  renameOrganisation,
  undeleteOrganisation,
} from './commands.js';
import { presentOrganisation } from './presenter.js';
import { ListOrganisationsQuery, OrganisationBody, OrganisationParams } from './schemas.js';

export function organisationRoutes(router: Router<AppState>, { authenticate, audited, idempotent, cursors }: RouteDeps): void {
  router.get(
    '/api/v1/organisations',
    authenticate,
    endpoint({ query: ListOrganisationsQuery }, async (ctx, { query }) => {
      const showDeleted = queryBool(query.showDeleted);
      const list = `organisations:${showDeleted}`;
      const page = cursors.page(list, query);
      const result = cursors.result(list, page, await listVisibleOrganisations(ctx.state.db, principalOf(ctx), page, showDeleted));
      ctx.body = { organisations: result.items.map(presentOrganisation), nextCursor: result.nextCursor };
    }),
  );

  router.post(
    '/api/v1/organisations',
    authenticate,
    idempotent,
    audited,
    endpoint({ body: OrganisationBody }, async (ctx, { body }) => {
      ctx.status = 201;
      ctx.body = presentOrganisation(await createOrganisation(ctx.state.db, principalOf(ctx), body.name));
    }),
  );

  router.get(
    '/api/v1/organisations/:id',
    authenticate,
    endpoint({ params: OrganisationParams }, async (ctx, { params }) => {
      ctx.body = presentOrganisation(await getOrganisation(ctx.state.db, principalOf(ctx), Number(params.id)));
    }),
  );

  router.put(
    '/api/v1/organisations/:id',
    authenticate,
    audited,
    endpoint({ params: OrganisationParams, body: OrganisationBody }, async (ctx, { params, body }) => {
      ctx.body = presentOrganisation(await renameOrganisation(ctx.state.db, principalOf(ctx), Number(params.id), body.name));
    }),
  );

  router.delete(
    '/api/v1/organisations/:id',
    authenticate,
    audited,
    endpoint({ params: OrganisationParams }, async (ctx, { params }) => {
      await deleteOrganisation(ctx.state.db, principalOf(ctx), Number(params.id));
      ctx.status = 204;
    }),
  );

  router.post(
    '/api/v1/organisations/:id/undelete',
    authenticate,
    idempotent,
    audited,
    endpoint({ params: OrganisationParams }, async (ctx, { params }) => {
      ctx.body = presentOrganisation(await undeleteOrganisation(ctx.state.db, principalOf(ctx), Number(params.id)));
    }),
  );
}
