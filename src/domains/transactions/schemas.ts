import { Type } from '@sinclair/typebox';
import { Id, IdOut, NullableTimestamp, pageOf, PageQuery, strictObject, Timestamp } from '../../platform/http/schemas.js';
import { component } from '../../platform/openapi/meta.js';
import { STATUSES } from './repository.js';

/** Calldata up to 128 KiB, the signer's bound. */
export const DATA_MAX_BYTES = 128 * 1024;

const Quantity = Type.Union(
  [Type.String({ pattern: '^(0|[1-9][0-9]{0,77}|0x[0-9a-fA-F]{1,64})$' }), Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })],
  { description: 'a non-negative integer: a decimal or 0x hex string, or a JSON number up to 2^53' },
);
const Address = Type.String({ pattern: '^0x[0-9a-fA-F]{40}$', description: 'EIP-55, or all lower or upper case' });
const Data = Type.String({ pattern: '^0x([0-9a-fA-F]{2})*$', maxLength: 2 + 2 * DATA_MAX_BYTES, description: 'calldata, 0x hex, at most 128 KiB' });

const sendFields = {
  chainId: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'a chain the operator configured' }),
  to: Type.Optional(Type.Union([Address, Type.Null()], { description: 'absent or null: a contract creation' })),
  value: Type.Optional(Quantity),
  data: Type.Optional(Data),
  gas: Type.Optional(Quantity),
  maxFeePerGas: Type.Optional(Quantity),
  maxPriorityFeePerGas: Type.Optional(Quantity),
};

/** A send: the service fills the nonce, the gas (the node's estimate and a margin) and the fees (from the fee history) when not given. */
export const SendBody = component('SendTransaction', strictObject(sendFields));
export const UserSendBody = strictObject({ key: Type.Optional(Type.String({ maxLength: 256 })), ...sendFields });

/** `eth_sendTransaction` on the rpc endpoints: the transaction as EIP-1193 clients send it (type 2; no nonce: the service chooses it). */
export const RpcSendTransaction = strictObject({
  ...sendFields,
  chainId: Type.Optional(Quantity),
  from: Type.Optional(Address),
  type: Type.Optional(Type.Union([Type.Literal(2), Type.Literal('0x2'), Type.Literal('2')])),
});

export const RpcSendParams = strictObject({ transaction: RpcSendTransaction });

export const WalletTransactionsParams = strictObject({ projectId: Id, walletId: Id });
export const TransactionParams = strictObject({ projectId: Id, transactionId: Id });
export const ProjectTransactionsParams = strictObject({ projectId: Id });
export const ListTransactionsQuery = strictObject({
  walletId: Type.Optional(Id),
  chainId: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,15}$' })),
  status: Type.Optional(Type.Union(STATUSES.map((s) => Type.Literal(s)))),
  ...PageQuery,
});

// `as const`: each literal keeps its type, so the client's written type is the schema's (test/programs/client/types.test.ts).
const PURPOSES = ['send', 'speedUp', 'cancel', 'gapFill'] as const;
const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);
const Attempt = strictObject({
  hash: Type.String(),
  purpose: Type.Union(PURPOSES.map((p) => Type.Literal(p))),
  nonce: Type.String(),
  gas: Type.String(),
  maxFeePerGas: Type.String(),
  maxPriorityFeePerGas: Type.String(),
  replaces: Nullable(Type.String()),
  status: Type.String(),
  createdAt: Timestamp,
  broadcastAt: NullableTimestamp,
});
export const TransactionOut = component(
  'Transaction',
  strictObject({
    id: IdOut,
    projectId: IdOut,
    walletId: IdOut,
    chainId: IdOut,
    kind: Type.Union([Type.Literal('send'), Type.Literal('gapFill')]),
    status: Type.Union(STATUSES.map((s) => Type.Literal(s))),
    waiting: Nullable(Type.String({ description: 'why it has not moved on: fees_above_cap, insufficient_funds, rpc_unavailable, nonce_used, …' })),
    from: Type.String(),
    to: Nullable(Type.String()),
    value: Type.String({ description: 'wei, decimal' }),
    data: Type.Optional(Type.String()),
    nonce: Nullable(Type.String()),
    hash: Nullable(Type.String({ description: 'the newest signed attempt, or the mined one' })),
    blockNumber: Nullable(Type.String()),
    blockHash: Nullable(Type.String()),
    receipt: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]),
    error: Type.Union([strictObject({ code: Type.String(), message: Type.String() }), Type.Null()]),
    cancelRequested: Type.Boolean(),
    createdAt: Timestamp,
    updatedAt: Timestamp,
    submittedAt: NullableTimestamp,
    expiresAt: Timestamp,
    events: Type.Optional(
      Type.Array(strictObject({ sequence: Type.Integer({ minimum: 1 }), type: Type.String() }), {
        description: 'its wallet.transaction.* events so far, in order (with GET of one transaction)',
      }),
    ),
    attempts: Type.Optional(Type.Array(Attempt)),
  }),
);
export const TransactionList = pageOf('transactions', TransactionOut);
