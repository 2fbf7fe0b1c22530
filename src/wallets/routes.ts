import type Router from '@koa/router';
import { principalOf } from '../auth/access.js';
import type { AppState } from '../http/context.js';
import type { RouteDeps } from '../http/route-deps.js';
import { endpoint } from '../http/validate.js';
import { checkIssuer, createWalletAsync, getProjectWallet, identifyCaller, listProjectWallets, signIn, type WalletDeps } from './commands.js';
import { presentWallet } from './presenter.js';
import { IssuerCheckBody, ListWalletsQuery, WalletParams, WalletRequestBody, WalletsParams } from './schemas.js';

export function walletRoutes(router: Router<AppState>, deps: RouteDeps & { wallets: WalletDeps }): void {
  const { wallets, authenticate, cursors } = deps;

  router.post(
    '/api/v1/signin',
    endpoint({ body: WalletRequestBody }, async (ctx, { body }) => {
      const caller = await identifyCaller(wallets, body, ctx);
      const { wallet, isNew } = await signIn(wallets, caller);
      ctx.body = { ...presentWallet(wallet), isNew };
    }),
  );

  router.post(
    '/api/v1/wallets/createasync',
    endpoint({ body: WalletRequestBody }, async (ctx, { body }) => {
      const caller = await identifyCaller(wallets, body, ctx);
      await createWalletAsync(wallets, caller);
      ctx.status = 202;
      ctx.body = { status: 'accepted' };
    }),
  );

  // A diagnostic: reads only, so read tokens may use it too.
  router.post(
    '/api/v1/project/:projectId/issuer/check',
    authenticate,
    endpoint({ params: WalletsParams, body: IssuerCheckBody }, async (ctx, { params, body }) => {
      ctx.body = await checkIssuer(wallets, principalOf(ctx), Number(params.projectId), body.token);
    }),
  );

  // Back-office lookups with an API token (CONTRACT.md section 5).
  router.get(
    '/api/v1/project/:projectId/wallets',
    authenticate,
    endpoint({ params: WalletsParams, query: ListWalletsQuery }, async (ctx, { params, query }) => {
      const projectId = Number(params.projectId);
      const list = `wallets:${projectId}:${query.email ?? ''}:${query.address ?? ''}`;
      const page = cursors.page(list, query);
      const rows = await listProjectWallets(ctx.state.db, principalOf(ctx), projectId, { email: query.email, address: query.address }, page);
      const result = cursors.result(list, page, rows);
      ctx.body = { wallets: result.items.map(presentWallet), nextCursor: result.nextCursor };
    }),
  );

  router.get(
    '/api/v1/project/:projectId/wallets/:walletId',
    authenticate,
    endpoint({ params: WalletParams }, async (ctx, { params }) => {
      ctx.body = presentWallet(await getProjectWallet(ctx.state.db, principalOf(ctx), Number(params.projectId), Number(params.walletId)));
    }),
  );
}
