import type Router from '@koa/router';
import { principalOf } from '../auth/access.js';
import type { AppState } from '../http/context.js';
import type { RouteDeps } from '../http/route-deps.js';
import { queryBool } from '../http/schemas.js';
import { endpoint } from '../http/validate.js';
import {
  changeProject,
  createProject,
  deleteProject,
  getProject,
  listOrganisationProjects,
  rotateProjectKey,
  rotateWalletWebhookSecret,
} from './commands.js';
import { presentProject } from './presenter.js';
import { CreateProjectBody, ListProjectsQuery, OrganisationIdParams, ProjectParams, RotateKeyBody, UpdateProjectBody } from './schemas.js';

export function projectRoutes(router: Router<AppState>, { authenticate, audited, idempotent, cursors, config, secretBox }: RouteDeps): void {
  router.post(
    '/api/v1/organisations/:id/projects',
    authenticate,
    idempotent,
    audited,
    endpoint({ params: OrganisationIdParams, body: CreateProjectBody }, async (ctx, { params, body }) => {
      const env = config.appEnv;
      const created = await createProject(ctx.state.db, principalOf(ctx), { env, secretBox }, Number(params.id), body);
      ctx.status = 201;
      ctx.body = {
        ...presentProject(created.project),
        projectKey: created.projectKey,
        ...(created.generatedSecret === undefined ? {} : { walletWebhookSecret: created.generatedSecret }),
      };
    }),
  );

  router.get(
    '/api/v1/organisations/:id/projects',
    authenticate,
    endpoint({ params: OrganisationIdParams, query: ListProjectsQuery }, async (ctx, { params, query }) => {
      const organisationId = Number(params.id);
      const showDeleted = queryBool(query.showDeleted);
      const list = `projects:${organisationId}:${showDeleted}`;
      const page = cursors.page(list, query);
      const result = cursors.result(list, page, await listOrganisationProjects(ctx.state.db, principalOf(ctx), organisationId, page, showDeleted));
      ctx.body = { projects: result.items.map(presentProject), nextCursor: result.nextCursor };
    }),
  );

  router.get(
    '/api/v1/project/:projectId',
    authenticate,
    endpoint({ params: ProjectParams }, async (ctx, { params }) => {
      ctx.body = presentProject(await getProject(ctx.state.db, principalOf(ctx), Number(params.projectId)));
    }),
  );

  router.put(
    '/api/v1/project/:projectId',
    authenticate,
    audited,
    endpoint({ params: ProjectParams, body: UpdateProjectBody }, async (ctx, { params, body }) => {
      ctx.body = presentProject(await changeProject(ctx.state.db, principalOf(ctx), config.appEnv, Number(params.projectId), body));
    }),
  );

  router.delete(
    '/api/v1/project/:projectId',
    authenticate,
    audited,
    endpoint({ params: ProjectParams }, async (ctx, { params }) => {
      await deleteProject(ctx.state.db, principalOf(ctx), Number(params.projectId));
      ctx.status = 204;
    }),
  );

  router.post(
    '/api/v1/project/:projectId/keys',
    authenticate,
    idempotent,
    audited,
    endpoint({ params: ProjectParams, body: RotateKeyBody }, async (ctx, { params, body }) => {
      const grace = body.graceSeconds ?? 86_400;
      const rotated = await rotateProjectKey(ctx.state.db, principalOf(ctx), config.appEnv, Number(params.projectId), grace);
      ctx.body = { projectKey: rotated.projectKey, previousKeysExpireAt: rotated.previousKeysExpireAt.toISOString() };
    }),
  );

  router.post(
    '/api/v1/project/:projectId/walletWebhook/secret',
    authenticate,
    idempotent,
    audited,
    endpoint({ params: ProjectParams }, async (ctx, { params }) => {
      const rotated = await rotateWalletWebhookSecret(ctx.state.db, principalOf(ctx), secretBox, Number(params.projectId));
      ctx.body = {
        walletWebhookSecret: rotated.walletWebhookSecret,
        previousSecretExpiresAt: rotated.previousSecretExpiresAt.toISOString(),
      };
    }),
  );
}
