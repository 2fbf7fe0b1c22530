import { Type } from '@sinclair/typebox';
import { Method as SigningMethod } from '../signing/policies/schemas.js';
import { Id, IdOut, pageOf, PageQuery, strictObject, Timestamp } from '../../platform/http/schemas.js';
import { component } from '../../platform/openapi/meta.js';

/** The wallet request body of the interface document; `key` is checked by the handler (missing → missing_project_key). */
export const WalletRequestBody = strictObject({
  key: Type.Optional(Type.String({ maxLength: 256 })),
  token: Type.Optional(Type.String({ maxLength: 256 })),
  any_other_tokens: Type.Optional(Type.String({ maxLength: 256 })),
});

export const IssuerCheckBody = strictObject({ token: Type.String({ minLength: 1, maxLength: 16_384 }) });

export const WalletsParams = strictObject({ projectId: Id });
export const WalletParams = strictObject({ projectId: Id, walletId: Id });
export const ListWalletsQuery = strictObject({
  email: Type.Optional(Type.String({ minLength: 1, maxLength: 320 })),
  address: Type.Optional(Type.String({ pattern: '^0x[0-9a-fA-F]{40}$' })),
  ...PageQuery,
});

const walletFields = {
  walletId: IdOut,
  walletAddress: Type.String({ pattern: '^0x[0-9a-fA-F]{40}$', description: 'EIP-55 checksummed' }),
  emailAddress: Type.String(),
  createdAt: Timestamp,
};
export const WalletOut = component('Wallet', Type.Object(walletFields, { additionalProperties: false }));
export const WalletList = pageOf('wallets', WalletOut);
export const SignInOut = Type.Object(
  { ...walletFields, isNew: Type.Boolean({ description: 'true only for the call that created the wallet' }) },
  { additionalProperties: false },
);
export const Accepted = Type.Object({ status: Type.Literal('accepted') }, { additionalProperties: false });
export const IssuerCheckOut = Type.Object(
  {
    ok: Type.Boolean({ description: 'every check passed' }),
    issuer: Type.String(),
    checks: Type.Array(
      Type.Object(
        {
          name: Type.String(),
          outcome: Type.Union([Type.Literal('passed'), Type.Literal('failed'), Type.Literal('skipped')]),
          detail: Type.Optional(Type.String()),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

/** `POST …/wallets/{walletId}/rpc`: one structured operation (docs/signing.md), read and judged by the signer. */
export const RpcBody = strictObject({
  method: SigningMethod,
  params: Type.Object({}, { description: "the method's parameters: `{ message }`, `{ typedData }`, `{ transaction }` or `{ chainId, address, nonce }`" }),
});
/** `POST /wallets/rpc`: the user present, authenticated as for sign-in (the project key in the body). */
export const UserRpcBody = strictObject({
  key: Type.Optional(Type.String({ maxLength: 256 })),
  method: SigningMethod,
  params: RpcBody.properties.params,
});
const Hex = Type.String({ pattern: '^0x[0-9a-fA-F]*$' });
export const RpcOut = Type.Union([
  strictObject({ signature: Hex }),
  strictObject({ signedTransaction: Hex, hash: Hex }),
  strictObject({ hash: Hex, transactionId: Type.Integer({ minimum: 1 }) }),
  strictObject({ transactionId: Type.Integer({ minimum: 1 }), status: Type.String(), waiting: Type.Union([Type.String(), Type.Null()]) }),
  strictObject({
    authorization: strictObject({ chainId: Hex, address: Type.String(), nonce: Hex, yParity: Hex, r: Hex, s: Hex }),
  }),
]);
