import type { RouteDeps } from '../../access/endpoints/route-deps.js';
import { queryBool } from '../../platform/http/schemas.js';
import { atDeployment, atOrganisation, declare, declareList, type Declaration } from '../../access/endpoints/declare.js';
import { createOrganisation, deleteOrganisation, listVisibleOrganisations, renameOrganisation, undeleteOrganisation } from './commands.js';
import { presentOrganisation } from './presenter.js';
import { ListOrganisationsQuery, OrganisationBody, OrganisationList, OrganisationOut, OrganisationParams } from './schemas.js';
import * as ex from '../../platform/openapi/examples.js';

export function organisationEndpoints(_deps: RouteDeps): Declaration[] {
  return [
    declareList(
      { method: 'GET', path: '/api/v1/organisations', ...atDeployment('organisation.list') },
      {
        query: ListOrganisationsQuery,
        doc: {
          operationId: 'listOrganisations',
          summary: 'List the organisations the token sees',
          description:
            'The operator sees every organisation; other tokens see their own. `showDeleted` includes soft-deleted ones; `name` finds those whose name contains it (any case).',
          tag: 'Organisations',
          responses: {
            200: { description: 'A page of organisations.', schema: OrganisationList, example: { organisations: [ex.organisation], nextCursor: null } },
          },
        },
      },
      async (ctx, { query, scope, paging }) => {
        const showDeleted = queryBool(query.showDeleted);
        const result = paging.pageOf(await listVisibleOrganisations(ctx.state.db, scope, paging.page, showDeleted, query.name));
        ctx.body = { organisations: result.items.map(presentOrganisation), nextCursor: result.nextCursor };
      },
    ),

    declare(
      {
        method: 'POST',
        path: '/api/v1/organisations',
        ...atDeployment('organisation.create'),
        write: { idempotent: true, target: { answer: 'id', organisation: true } },
      },
      {
        body: OrganisationBody,
        doc: {
          operationId: 'createOrganisation',
          summary: 'Create an organisation (operator only)',
          tag: 'Organisations',
          requestExample: { name: 'Acme Gyms' },
          responses: { 201: { description: 'Created.', schema: OrganisationOut, example: ex.organisation } },
        },
      },
      async (ctx, { body }) => {
        ctx.status = 201;
        ctx.body = presentOrganisation(await createOrganisation(ctx.state.db, body.name));
      },
    ),

    declare(
      {
        method: 'GET',
        path: '/api/v1/organisations/:id',
        auth: 'apiToken',
        // The operator may look at a soft-deleted organisation (to decide on undelete); nobody else can reach one.
        tenant: { level: 'organisation', deleted: 'shownToOperator' },
        may: 'organisation.read',
      },
      {
        params: OrganisationParams,
        doc: {
          operationId: 'getOrganisation',
          summary: 'Get an organisation',
          description: 'A soft-deleted organisation is still shown (with `deletedAt`).',
          tag: 'Organisations',
          responses: { 200: { description: 'The organisation.', schema: OrganisationOut, example: ex.organisation } },
        },
      },
      (ctx, { scope }) => {
        ctx.body = presentOrganisation(scope.organisation);
        return Promise.resolve();
      },
    ),

    declare(
      {
        method: 'PUT',
        path: '/api/v1/organisations/:id',
        ...atOrganisation('organisation.rename'),
        write: { idempotent: false, target: 'none' },
      },
      {
        params: OrganisationParams,
        body: OrganisationBody,
        doc: {
          operationId: 'renameOrganisation',
          summary: 'Rename an organisation',
          description: 'A soft-deleted organisation is 404.',
          tag: 'Organisations',
          requestExample: { name: 'Acme Gyms Ltd' },
          responses: { 200: { description: 'The renamed organisation.', schema: OrganisationOut, example: ex.organisation } },
        },
      },
      async (ctx, { scope, body }) => {
        ctx.body = presentOrganisation(await renameOrganisation(ctx.state.db, scope, body.name));
      },
    ),

    declare(
      {
        method: 'DELETE',
        path: '/api/v1/organisations/:id',
        ...atOrganisation('organisation.delete'),
        write: { idempotent: false, invalidatesProjectKeys: true, target: 'none' },
      },
      {
        params: OrganisationParams,
        doc: {
          operationId: 'deleteOrganisation',
          summary: 'Soft-delete an organisation',
          description: "Its projects' keys and its tokens stop working until it is undeleted. Already deleted: 404.",
          tag: 'Organisations',
          responses: { 204: { description: 'Deleted.' } },
        },
      },
      async (ctx, { scope }) => {
        await deleteOrganisation(ctx.state.db, scope);
        ctx.status = 204;
      },
    ),

    declare(
      {
        method: 'POST',
        path: '/api/v1/organisations/:id/undelete',
        ...atOrganisation('organisation.undelete', 'shown'),
        write: { idempotent: true, invalidatesProjectKeys: true, target: 'none' },
      },
      {
        params: OrganisationParams,
        doc: {
          operationId: 'undeleteOrganisation',
          summary: 'Undelete an organisation',
          description: 'Restores its keys and tokens.',
          tag: 'Organisations',
          errors: { 409: 'not_deleted: the organisation is not deleted.' },
          responses: { 200: { description: 'The restored organisation.', schema: OrganisationOut, example: ex.organisation } },
        },
      },
      async (ctx, { scope }) => {
        ctx.body = presentOrganisation(await undeleteOrganisation(ctx.state.db, scope));
      },
    ),
  ];
}
