import type { RouteDeps } from '../../access/endpoints/route-deps.js';
import { atProject, declare, type Declaration } from '../../access/endpoints/declare.js';
import { OPERATION_BODY_BYTES } from '../../platform/signer/limits.js';
import { principalKey } from '../../access/auth/principal.js';
import { getProjectWallet, getUserWallet, type WalletDeps } from '../wallets/commands.js';
import { RpcBody, RpcOut, UserRpcBody, WalletParams } from '../wallets/schemas.js';
import { signWithWallet, type SignDeps } from './sign.js';
import { SIGNING_503 } from '../../platform/signer/carry-over.js';
import * as ex from '../../platform/openapi/examples.js';
import type { AppContext } from '../../platform/http/context.js';
import { requestKeyOf, sendFromRpc, type TransactionDeps } from '../transactions/commands.js';

/** Operations carry calldata up to 128 KiB (hex: twice that) and typed data: the signer's limit, less room for the envelope. */
const RPC_BODY_LIMIT = OPERATION_BODY_BYTES;

const answers = {
  200: {
    description:
      "The method's answer: `signature`, `signedTransaction` and `hash`, or `authorization`; for `eth_sendTransaction`, the `hash` of the transaction sent and its `transactionId` (202 and no hash while it waits in its queue: docs/transactions.md).",
    schema: RpcOut,
    example: { signature: `0x${'ab'.repeat(65)}` },
  },
};
const siwe = { method: 'personal_sign' as const, params: { message: 'app.example.com wants you to sign in with your Ethereum account' } };
const refusals = {
  503: SIGNING_503,
  400: 'invalid_operation: the operation cannot be read as its method defines it (the field is named), or a body field problem.',
  403: "policy_denied: the project's policy does not allow it (the rule or the limit is named; a project without a policy signs nothing).",
};

/**
 * Signing (docs/signing.md), asked two ways: by the user present (JWT and project key, as sign-in) and
 * by the customer's backend (a `signer` token). Both take Idempotency-Key; every decision is
 * recorded by the command.
 */
export function rpcEndpoints(deps: RouteDeps & { wallets: WalletDeps & SignDeps; transactions: TransactionDeps }): Declaration[] {
  const { wallets, transactions } = deps;

  /** The method's answer: a send goes to the transactions domain (answered with its hash), any other method is signed. */
  const answer = async (
    ctx: AppContext,
    wallet: Parameters<typeof signWithWallet>[1],
    project: Parameters<typeof signWithWallet>[2],
    body: { method: string; params: unknown },
    who: Parameters<typeof signWithWallet>[4] & { requestKey?: string | undefined },
  ): Promise<void> => {
    if (body.method === 'eth_sendTransaction') {
      const sent = await sendFromRpc(transactions, wallet, project, body.params, who);
      ctx.status = sent.status;
      ctx.body = sent.body;
      return;
    }
    ctx.body = await signWithWallet(wallets, wallet, project, { method: body.method, params: body.params }, who);
  };

  const user = declare(
    { method: 'POST', path: '/api/v1/wallets/rpc', auth: 'userJwt', user: { verify: 'beforeBody' }, write: { idempotent: true, audit: 'command' } },
    {
      body: UserRpcBody,
      bodyLimit: RPC_BODY_LIMIT,
      doc: {
        operationId: 'signAsUser',
        summary: "Sign with the user's own wallet, under the project policy",
        description:
          'The user present: their JWT as the bearer and the project key in the body, as for sign-in; the wallet is theirs (404 `wallet_not_found` until they have one). The JWT and the key are verified before the body is validated. Policy rules see `caller: "user"`. Otherwise as the backend\'s signing endpoint.',
        tag: 'Wallets',
        requestExample: { key: ex.projectKey, ...siwe },
        errors: {
          ...refusals,
          400: `${refusals[400]} missing_project_key or invalid_project_key as for sign-in.`,
          401: 'missing_token or invalid_token: the JWT is checked before the body is validated (a missing or malformed one before the body is read).',
          404: 'wallet_not_found: the user has no wallet yet.',
          429: 'rate_limited: every refused authentication (project key or JWT) counts against the client address.',
        },
        responses: answers,
      },
    },
    async (ctx, { body, user }) => {
      const wallet = await getUserWallet(ctx.state.db, user);
      const who = { caller: 'user' as const, actor: `project:${user.project.id}`, requestId: ctx.state.requestId, requestKey: requestKeyOf(ctx, '') };
      await answer(ctx, wallet, user.project, body, who);
    },
  );

  return [
    user,

    declare(
      {
        method: 'POST',
        path: '/api/v1/project/:projectId/wallets/:walletId/rpc',
        ...atProject('wallet.sign'),
        // The command records every decision, allowed or denied, in a transaction of its own.
        write: { idempotent: true, audit: 'command' },
      },
      {
        params: WalletParams,
        body: RpcBody,
        bodyLimit: RPC_BODY_LIMIT,
        doc: {
          operationId: 'signWithWallet',
          summary: 'Sign with a wallet, under the project policy',
          description:
            'Needs a token of the `signer` role (`admin` does not imply it). The signer reads the operation and computes its digest, checks that the wallet\'s key belongs to the project, evaluates the project\'s newest policy (rules see `caller: "server"`), and only then decrypts the key. Every decision is audited and sent as a `wallet.signature.created` or `wallet.signature.denied` event.',
          tag: 'Wallets',
          requestExample: siwe,
          errors: { ...refusals, 403: `${refusals[403]} Or a token without the signer role.` },
          responses: answers,
        },
      },
      async (ctx, { scope, params, body }) => {
        const wallet = await getProjectWallet(wallets, ctx.state.db, scope, Number(params.walletId));
        const who = {
          caller: 'server' as const,
          actor: principalKey(scope.principal),
          requestId: ctx.state.requestId,
          requestKey: requestKeyOf(ctx, principalKey(scope.principal)),
        };
        await answer(ctx, wallet, scope.project, body, who);
      },
    ),
  ];
}
