import type { RouteDeps } from '../../access/endpoints/route-deps.js';
import { queryBool } from '../../platform/http/schemas.js';
import { atOrganisation, atProject, declare, declareList, type Declaration } from '../../access/endpoints/declare.js';
import { changeProject, createProject, deleteProject, listOrganisationProjects, rotateProjectKey, rotateWalletWebhookSecret } from './commands.js';
import { presentProject } from './presenter.js';
import {
  CreateProjectBody,
  KeyRotated,
  ListProjectsQuery,
  OrganisationIdParams,
  ProjectCreated,
  ProjectList,
  ProjectOut,
  ProjectParams,
  RotateKeyBody,
  UpdateProjectBody,
  WalletWebhookSecretRotated,
} from './schemas.js';
import * as ex from '../../platform/openapi/examples.js';

/** The one rule of domains/projects/issuer-binding.ts, as the reference states it. */
const ISSUER_IN_USE =
  'issuer_in_use: another organisation trusts this issuer. Organisations share an issuer only when each of their projects requires a claim of its own (`tokenClaim`) or has its own `audience`, so that a token minted for one project cannot be used at another.';
export function projectEndpoints({ config, secretBox, now }: RouteDeps): Declaration[] {
  return [
    declare(
      {
        method: 'POST',
        path: '/api/v1/organisations/:id/projects',
        ...atOrganisation('project.create'),
        write: { idempotent: true, target: { answer: 'id' } },
      },
      {
        params: OrganisationIdParams,
        body: CreateProjectBody,
        doc: {
          operationId: 'createProject',
          summary: 'Create a project',
          description:
            "Returns the project key once (`pk_test_…` or `pk_live_…`, this deployment's environment). `issuer` must be https; `walletWebhookUrl` https in production (http allowed in testnet) and not a private address in production. Without `walletWebhookSecret` one is generated and shown once.",
          tag: 'Projects',
          requestExample: { name: 'Members app', issuer: 'https://login.example.com', walletWebhookUrl: 'https://api.example.com/hooks/wallets' },
          errors: { 409: ISSUER_IN_USE },
          responses: {
            201: {
              description: 'Created; the key (and a generated secret) shown once.',
              schema: ProjectCreated,
              example: { ...ex.project, projectKey: ex.projectKey, walletWebhookSecret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' },
            },
          },
        },
      },
      async (ctx, { scope, body }) => {
        const created = await createProject(ctx.state.db, scope, { env: config.appEnv, secretBox, egress: { allow: config.egressAllowPrivate } }, body);
        ctx.status = 201;
        ctx.body = {
          ...presentProject(created.project),
          projectKey: created.projectKey,
          ...(created.generatedSecret === undefined ? {} : { walletWebhookSecret: created.generatedSecret }),
        };
      },
    ),

    declareList(
      { method: 'GET', path: '/api/v1/organisations/:id/projects', ...atOrganisation('project.list') },
      {
        params: OrganisationIdParams,
        query: ListProjectsQuery,
        doc: {
          operationId: 'listProjects',
          summary: "List an organisation's projects",
          tag: 'Projects',
          responses: { 200: { description: 'A page of projects.', schema: ProjectList, example: { projects: [ex.project], nextCursor: null } } },
        },
      },
      async (ctx, { scope, query, paging }) => {
        const showDeleted = queryBool(query.showDeleted);
        const result = paging.pageOf(await listOrganisationProjects(ctx.state.db, scope, paging.page, showDeleted));
        ctx.body = { projects: result.items.map(presentProject), nextCursor: result.nextCursor };
      },
    ),

    declare(
      { method: 'GET', path: '/api/v1/project/:projectId', ...atProject('project.read') },
      {
        params: ProjectParams,
        doc: {
          operationId: 'getProject',
          summary: 'Get a project',
          tag: 'Projects',
          responses: { 200: { description: 'The project.', schema: ProjectOut, example: ex.project } },
        },
      },
      (ctx, { scope }) => {
        ctx.body = presentProject(scope.project);
        return Promise.resolve();
      },
    ),

    declare(
      {
        method: 'PUT',
        path: '/api/v1/project/:projectId',
        ...atProject('project.change'),
        write: { idempotent: false, invalidatesProjectKeys: true, target: { param: 'projectId' } },
      },
      {
        params: ProjectParams,
        body: UpdateProjectBody,
        doc: {
          operationId: 'updateProject',
          summary: 'Change a project',
          description: 'Only the fields given change; `walletWebhookUrl: null` removes the wallet webhook.',
          tag: 'Projects',
          requestExample: { requireVerifiedEmail: false },
          errors: { 409: ISSUER_IN_USE },
          responses: { 200: { description: 'The changed project.', schema: ProjectOut, example: ex.project } },
        },
      },
      async (ctx, { scope, body }) => {
        ctx.body = presentProject(await changeProject(ctx.state.db, scope, { env: config.appEnv, egress: { allow: config.egressAllowPrivate } }, body));
      },
    ),

    declare(
      {
        method: 'DELETE',
        path: '/api/v1/project/:projectId',
        ...atProject('project.delete'),
        write: { idempotent: false, invalidatesProjectKeys: true, target: { param: 'projectId' } },
      },
      {
        params: ProjectParams,
        doc: {
          operationId: 'deleteProject',
          summary: 'Soft-delete a project',
          description:
            'Its keys stop working at once: in this API process when the answer is sent, in the others when the change notification reaches them (milliseconds).',
          tag: 'Projects',
          responses: { 204: { description: 'Deleted.' } },
        },
      },
      async (ctx, { scope }) => {
        await deleteProject(ctx.state.db, scope, now);
        ctx.status = 204;
      },
    ),

    declare(
      {
        method: 'POST',
        path: '/api/v1/project/:projectId/keys',
        ...atProject('project.rotateKey'),
        write: { idempotent: true, invalidatesProjectKeys: true, target: { param: 'projectId' } },
      },
      {
        params: ProjectParams,
        body: RotateKeyBody,
        doc: {
          operationId: 'rotateProjectKey',
          summary: 'Rotate the project key',
          description: 'A new key, shown once; the previous keys keep working for `graceSeconds` (default 86400, 0 = stop at once).',
          tag: 'Projects',
          requestExample: { graceSeconds: 3600 },
          responses: {
            200: { description: 'The new key.', schema: KeyRotated, example: { projectKey: ex.projectKey, previousKeysExpireAt: ex.exampleAt } },
          },
        },
      },
      async (ctx, { scope, body }) => {
        const grace = body.graceSeconds ?? 86_400;
        const rotated = await rotateProjectKey(ctx.state.db, scope, config.appEnv, grace);
        ctx.body = { projectKey: rotated.projectKey, previousKeysExpireAt: rotated.previousKeysExpireAt.toISOString() };
      },
    ),

    declare(
      {
        method: 'POST',
        path: '/api/v1/project/:projectId/walletWebhook/secret',
        ...atProject('project.rotateWalletWebhookSecret'),
        write: { idempotent: true, target: { param: 'projectId' } },
      },
      {
        params: ProjectParams,
        doc: {
          operationId: 'rotateWalletWebhookSecret',
          summary: 'Rotate the wallet-webhook secret',
          description: 'A new generated secret, shown once; the previous one also signs deliveries for 24 h.',
          tag: 'Projects',
          responses: {
            200: {
              description: 'The new secret.',
              schema: WalletWebhookSecretRotated,
              example: { walletWebhookSecret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', previousSecretExpiresAt: ex.exampleAt },
            },
          },
        },
      },
      async (ctx, { scope }) => {
        const rotated = await rotateWalletWebhookSecret(ctx.state.db, scope, secretBox, now);
        ctx.body = {
          walletWebhookSecret: rotated.walletWebhookSecret,
          previousSecretExpiresAt: rotated.previousSecretExpiresAt.toISOString(),
        };
      },
    ),
  ];
}
