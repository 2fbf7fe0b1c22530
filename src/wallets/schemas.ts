import { Type } from '@sinclair/typebox';
import { Id, PageQuery, strictObject } from '../http/schemas.js';

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
