import type { RouteDeps } from '../../access/endpoints/route-deps.js';
import { queryBool } from '../../platform/http/schemas.js';
import { atOrganisation, declare, declareList, type Declaration } from '../../access/endpoints/declare.js';
import { createToken, listOrganisationTokens, revokeOrganisationToken } from './commands.js';
import { presentToken } from './presenter.js';
import { CreateTokenBody, ListTokensQuery, TokenCreated, TokenList, TokenParams, TokensParams } from './schemas.js';
import * as ex from '../../platform/openapi/examples.js';

export function tokenEndpoints({ config }: RouteDeps): Declaration[] {
  return [
    declare(
      {
        method: 'POST',
        path: '/api/v1/organisations/:id/tokens',
        ...atOrganisation('token.create'),
        write: { idempotent: true, target: { answer: 'id' } },
      },
      {
        params: TokensParams,
        body: CreateTokenBody,
        doc: {
          operationId: 'createToken',
          summary: 'Create an API token',
          description: 'Organisation scope, or project scope with `projectId`; role `admin` or `read`. The token is shown once.',
          tag: 'API tokens',
          requestExample: { name: 'ci', role: 'admin' },
          responses: {
            201: {
              description: 'Created; the token shown once.',
              schema: TokenCreated,
              example: { ...ex.token, token: 'sk_test_Q2xhcmtlIGlzIGEgZ29vZCBuYW1lIGZvciBh' },
            },
          },
        },
      },
      async (ctx, { scope, body }) => {
        const created = await createToken(ctx.state.db, scope, config.appEnv, body);
        ctx.status = 201;
        ctx.body = { ...presentToken(created.row), token: created.token };
      },
    ),

    declareList(
      { method: 'GET', path: '/api/v1/organisations/:id/tokens', ...atOrganisation('token.list') },
      {
        params: TokensParams,
        query: ListTokensQuery,
        doc: {
          operationId: 'listTokens',
          summary: "List an organisation's API tokens",
          description: 'Never the secrets. `showRevoked` includes revoked ones.',
          tag: 'API tokens',
          responses: { 200: { description: 'A page of tokens.', schema: TokenList, example: { tokens: [ex.token], nextCursor: null } } },
        },
      },
      async (ctx, { scope, query, paging }) => {
        const showRevoked = queryBool(query.showRevoked);
        const result = paging.pageOf(await listOrganisationTokens(ctx.state.db, scope, paging.page, showRevoked));
        ctx.body = { tokens: result.items.map(presentToken), nextCursor: result.nextCursor };
      },
    ),

    declare(
      {
        method: 'DELETE',
        path: '/api/v1/organisations/:id/tokens/:tokenId',
        ...atOrganisation('token.revoke'),
        write: { idempotent: false, target: { param: 'tokenId' } },
      },
      {
        params: TokenParams,
        doc: {
          operationId: 'revokeToken',
          summary: 'Revoke an API token',
          description: 'It stops working at once. Revoking it again changes nothing (204); an unknown token is 404.',
          tag: 'API tokens',
          responses: { 204: { description: 'Revoked.' } },
        },
      },
      async (ctx, { scope, params }) => {
        await revokeOrganisationToken(ctx.state.db, scope, Number(params.tokenId));
        ctx.status = 204;
      },
    ),
  ];
}
