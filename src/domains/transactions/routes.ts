import type { RouteDeps } from '../../access/endpoints/route-deps.js';
import { atProject, declare, declareList, type Declaration } from '../../access/endpoints/declare.js';
import { principalKey } from '../../access/auth/principal.js';
import { getProjectWallet, getUserWallet, type WalletDeps } from '../wallets/commands.js';
import { SIGNING_503 } from '../../platform/signer/carry-over.js';
import {
  cancelTransaction,
  getTransaction,
  listProjectTransactions,
  requestKeyOf,
  sendTransaction,
  speedUpTransaction,
  type TransactionDeps,
} from './commands.js';
import { presentTransaction } from './presenter.js';
import {
  ListTransactionsQuery,
  ProjectTransactionsParams,
  SendBody,
  TransactionList,
  TransactionOut,
  TransactionParams,
  UserSendBody,
  WalletTransactionsParams,
} from './schemas.js';
import * as ex from '../../platform/openapi/examples.js';

const example = {
  id: 311,
  projectId: 34,
  walletId: 78,
  chainId: 8453,
  kind: 'send',
  status: 'submitted',
  waiting: null,
  from: ex.exampleAddress.toLowerCase(),
  to: '0x4200000000000000000000000000000000000006',
  value: '1000000000000000',
  data: '0x',
  nonce: '7',
  hash: `0x${'5e'.repeat(32)}`,
  blockNumber: null,
  blockHash: null,
  receipt: null,
  error: null,
  cancelRequested: false,
  createdAt: ex.exampleAt,
  updatedAt: ex.exampleAt,
  submittedAt: ex.exampleAt,
  expiresAt: ex.exampleAt,
};
const sendExample = { chainId: 8453, to: '0x4200000000000000000000000000000000000006', value: '1000000000000000' };
const accepted = {
  202: {
    description:
      'Accepted: the transaction as it stands when the answer goes (`submitted` when its queue was free and the policy allowed it; `queued` while it waits, `waiting` saying for what; `failed` with `error` when the policy or the node refused it).',
    schema: TransactionOut,
    example,
  },
};
const refusals = {
  400: "unknown_chain (a chain this deployment does not send on), fee_above_cap (fee fields above the chain's caps), or a field problem.",
  503: SIGNING_503,
};

/** Sending transactions and following them (docs/transactions.md). */
export function transactionEndpoints(deps: RouteDeps & { transactions: TransactionDeps; wallets: WalletDeps }): Declaration[] {
  const { transactions, wallets } = deps;
  return [
    declare(
      { method: 'POST', path: '/api/v1/wallets/transactions', auth: 'userJwt', user: { verify: 'beforeBody' }, write: { idempotent: true, audit: 'command' } },
      {
        body: UserSendBody,
        doc: {
          operationId: 'sendAsUser',
          summary: "Send a transaction from the user's own wallet",
          description:
            'The user present: their JWT as the bearer and the project key in the body, as for sign-in. Policy rules see `caller: "user"`. Otherwise as the backend\'s send.',
          tag: 'Transactions',
          requestExample: { key: ex.projectKey, ...sendExample },
          errors: { ...refusals, 401: 'missing_token or invalid_token.', 404: 'wallet_not_found: the user has no wallet yet.' },
          responses: accepted,
        },
      },
      async (ctx, { body, user }) => {
        const wallet = await getUserWallet(ctx.state.db, user);
        // The project key authenticated the request; the rest is the send.
        const input = { ...body, key: undefined };
        const who = { caller: 'user' as const, actor: `project:${user.project.id}`, requestId: ctx.state.requestId, requestKey: requestKeyOf(ctx, '') };
        const row = await sendTransaction(transactions, wallet, user.project, input, who);
        ctx.status = 202;
        ctx.body = presentTransaction(row);
      },
    ),

    declare(
      {
        method: 'POST',
        path: '/api/v1/project/:projectId/wallets/:walletId/transactions',
        ...atProject('transaction.send'),
        write: { idempotent: true, audit: 'command' },
      },
      {
        params: WalletTransactionsParams,
        body: SendBody,
        doc: {
          operationId: 'sendTransaction',
          summary: 'Send a transaction from a wallet',
          description:
            "Needs a token of the `signer` role. The service chooses the nonce (one ledger per chain and address), fills the gas (the node's estimate plus a margin) and the fees (from the fee history, within the chain's caps) when not given, has the signer sign it under the project's policy (`eth_sendTransaction`, with the final fields), records the signed bytes, then broadcasts them. It then follows the transaction to `confirmed` at the chain's depth, re-pricing it when stuck and sending it again after a reorg; each change is a `wallet.transaction.*` event. Idempotency-Key: the same key answers the same transaction.",
          tag: 'Transactions',
          requestExample: sendExample,
          errors: { ...refusals, 403: 'A token without the signer role.', 404: 'No such wallet.' },
          responses: accepted,
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
        const row = await sendTransaction(transactions, wallet, scope.project, body, who);
        ctx.status = 202;
        ctx.body = presentTransaction(row);
      },
    ),

    declareList(
      { method: 'GET', path: '/api/v1/project/:projectId/transactions', ...atProject('transaction.read') },
      {
        params: ProjectTransactionsParams,
        query: ListTransactionsQuery,
        doc: {
          operationId: 'listTransactions',
          summary: "A project's transactions",
          description: 'Oldest first; `walletId`, `chainId` and `status` filter.',
          tag: 'Transactions',
          responses: { 200: { description: 'A page of transactions.', schema: TransactionList, example: { transactions: [example], nextCursor: null } } },
        },
      },
      async (ctx, { scope, query, paging }) => {
        const rows = await listProjectTransactions(
          ctx.state.db,
          scope,
          {
            walletId: query.walletId === undefined ? undefined : Number(query.walletId),
            chainId: query.chainId === undefined ? undefined : Number(query.chainId),
            status: query.status,
          },
          paging.page,
        );
        const page = paging.pageOf(rows);
        ctx.body = { transactions: page.items.map((r) => presentTransaction(r)), nextCursor: page.nextCursor };
      },
    ),

    declare(
      { method: 'GET', path: '/api/v1/project/:projectId/transactions/:transactionId', ...atProject('transaction.read') },
      {
        params: TransactionParams,
        doc: {
          operationId: 'getTransaction',
          summary: 'A transaction, with its signed attempts',
          tag: 'Transactions',
          responses: { 200: { description: 'The transaction.', schema: TransactionOut, example } },
        },
      },
      async (ctx, { scope, params }) => {
        const { row, attempts } = await getTransaction(ctx.state.db, scope, Number(params.transactionId));
        ctx.body = presentTransaction(row, attempts);
      },
    ),

    declare(
      {
        method: 'POST',
        path: '/api/v1/project/:projectId/transactions/:transactionId/cancel',
        ...atProject('transaction.send'),
        write: { idempotent: true, audit: 'command' },
      },
      {
        params: TransactionParams,
        doc: {
          operationId: 'cancelTransaction',
          summary: 'Cancel a transaction',
          description:
            'A queued send is cancelled at once. A signed one is replaced by a no-op at its nonce (a transfer of nothing to the wallet itself) with higher fees, under the policy (`purpose: "cancel"`); it is `cancelled` if that is mined, or ends as it would have if the original is mined first.',
          tag: 'Transactions',
          errors: { 409: 'transaction_settled: it is mined or settled.', 404: 'No such transaction.', 503: SIGNING_503 },
          responses: { 200: { description: 'The transaction after the request.', schema: TransactionOut, example: { ...example, cancelRequested: true } } },
        },
      },
      async (ctx, { scope, params }) => {
        ctx.body = presentTransaction(await cancelTransaction(transactions, scope, Number(params.transactionId), ctx.state.requestId));
      },
    ),

    declare(
      {
        method: 'POST',
        path: '/api/v1/project/:projectId/transactions/:transactionId/speed-up',
        ...atProject('transaction.send'),
        write: { idempotent: true, audit: 'command' },
      },
      {
        params: TransactionParams,
        doc: {
          operationId: 'speedUpTransaction',
          summary: 'Re-price a transaction now',
          description:
            'Replaces the signed transaction by the same one with fees at least the chain\'s bump higher (within its caps), under the policy (`purpose: "speedUp"`). Stuck transactions are re-priced by the service anyway; this does it now.',
          tag: 'Transactions',
          errors: { 409: 'transaction_settled, or not_signed (it waits in the queue: nothing to re-price).', 404: 'No such transaction.', 503: SIGNING_503 },
          responses: { 200: { description: 'The transaction after the request.', schema: TransactionOut, example } },
        },
      },
      async (ctx, { scope, params }) => {
        ctx.body = presentTransaction(await speedUpTransaction(transactions, scope, Number(params.transactionId)));
      },
    ),
  ];
}
