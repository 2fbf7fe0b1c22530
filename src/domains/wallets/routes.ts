import type { RouteDeps } from '../../access/endpoints/route-deps.js';
import { atProject, declare, declareList, type Declaration } from '../../access/endpoints/declare.js';
import { checkIssuer, createWalletAsync, getProjectWallet, listProjectWallets, signIn, type WalletDeps } from './commands.js';
import { presentWallet } from './presenter.js';
import {
  Accepted,
  IssuerCheckBody,
  IssuerCheckOut,
  ListWalletsQuery,
  SignInOut,
  WalletList,
  WalletOut,
  WalletParams,
  WalletRequestBody,
  WalletsParams,
} from './schemas.js';
import * as ex from '../../platform/openapi/examples.js';
import { WALLET_BODY_LIMIT } from '../../platform/http/body.js';

export function walletEndpoints(deps: RouteDeps & { wallets: WalletDeps }): Declaration[] {
  const { wallets } = deps;

  return [
    declare(
      {
        method: 'POST',
        path: '/api/v1/signin',
        auth: 'userJwt',
        user: { verify: 'afterValidation', prefetchWallet: true },
        write: { idempotent: false, audit: 'command' },
      },
      {
        body: WalletRequestBody,
        bodyLimit: WALLET_BODY_LIMIT,
        doc: {
          operationId: 'signIn',
          summary: 'Sign a user in: their wallet, created on first call',
          description:
            'Synchronous. The wallet of (project, lower-cased `email` of the JWT), created once whatever the concurrency; `isNew` is true only for the call that created it. `token` (alias `any_other_tokens`) is passed through to the wallet-created webhook. A failed wallet-created webhook is re-sent at once.',
          tag: 'Wallets',
          requestExample: { key: ex.projectKey, token: 'order-4711' },
          errors: {
            400: 'missing_project_key or invalid_project_key (a key of another environment, unknown, of a deleted project or organisation, or with whitespace), or a body field problem.',
          },
          responses: { 200: { description: 'The wallet.', schema: SignInOut, example: { ...ex.wallet, isNew: true } } },
        },
      },
      async (ctx, { user }) => {
        const { wallet, isNew } = await signIn(wallets, user);
        ctx.body = { ...presentWallet(wallet), isNew };
      },
    ),

    declare(
      {
        method: 'POST',
        path: '/api/v1/wallets/createasync',
        auth: 'userJwt',
        user: { verify: 'afterValidation' },
        write: { idempotent: false, audit: 'command' },
      },
      {
        body: WalletRequestBody,
        bodyLimit: WALLET_BODY_LIMIT,
        doc: {
          operationId: 'createWalletAsync',
          summary: 'Create the wallet in the background',
          description:
            'Answered 202 once the request is committed; the wallet is created and its webhook sent by the relay. Idempotent by identity as sign-in is.',
          tag: 'Wallets',
          requestExample: { key: ex.projectKey },
          errors: {
            400: 'missing_project_key or invalid_project_key (a key of another environment, unknown, of a deleted project or organisation, or with whitespace), or a body field problem.',
          },
          responses: { 202: { description: 'Accepted.', schema: Accepted, example: { status: 'accepted' } } },
        },
      },
      async (ctx, { user }) => {
        await createWalletAsync(wallets, user);
        ctx.status = 202;
        ctx.body = { status: 'accepted' };
      },
    ),

    // A diagnostic: reads only, so read tokens may use it too.
    declare(
      {
        method: 'POST',
        path: '/api/v1/project/:projectId/issuer/check',
        ...atProject('project.checkIssuer'),
        readOnly: true,
      },
      {
        params: WalletsParams,
        body: IssuerCheckBody,
        doc: {
          operationId: 'checkIssuer',
          summary: "Check a sample JWT against the project's issuer configuration",
          description: 'Runs every check of section 11 and reports each outcome; creates nothing. Read tokens may use it.',
          tag: 'Wallets',
          requestExample: { token: 'eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJpc3MiOiJodHRwczovL2xvZ2luLmV4YW1wbGUuY29tIn0.c2ln' },
          responses: {
            200: {
              description: 'The outcome of every check.',
              schema: IssuerCheckOut,
              example: {
                ok: false,
                issuer: 'https://login.example.com',
                checks: [
                  { name: 'discovery', outcome: 'passed' },
                  { name: 'aud', outcome: 'failed', detail: 'aud is not urn:custody:testnet' },
                ],
              },
            },
          },
        },
      },
      async (ctx, { scope, body }) => {
        ctx.body = await checkIssuer(wallets, scope, body.token);
      },
    ),

    // Back-office lookups with an API token (docs/interface.md section 5).
    declareList(
      { method: 'GET', path: '/api/v1/project/:projectId/wallets', ...atProject('wallet.read') },
      {
        params: WalletsParams,
        query: ListWalletsQuery,
        doc: {
          operationId: 'listWallets',
          summary: "Find a project's wallets",
          description: '`email` (case-insensitive) and `address` filter; both optional.',
          tag: 'Wallets',
          responses: { 200: { description: 'A page of wallets.', schema: WalletList, example: { wallets: [ex.wallet], nextCursor: null } } },
        },
      },
      async (ctx, { scope, query, paging }) => {
        const rows = await listProjectWallets(ctx.state.db, scope, { email: query.email, address: query.address }, paging.page);
        const result = paging.pageOf(rows);
        ctx.body = { wallets: result.items.map(presentWallet), nextCursor: result.nextCursor };
      },
    ),

    declare(
      { method: 'GET', path: '/api/v1/project/:projectId/wallets/:walletId', ...atProject('wallet.read') },
      {
        params: WalletParams,
        doc: {
          operationId: 'getWallet',
          summary: 'Get a wallet',
          tag: 'Wallets',
          responses: { 200: { description: 'The wallet.', schema: WalletOut, example: ex.wallet } },
        },
      },
      async (ctx, { scope, params }) => {
        ctx.body = presentWallet(await getProjectWallet(deps.wallets, ctx.state.db, scope, Number(params.walletId)));
      },
    ),
  ];
}
