import { Type } from '@sinclair/typebox';
import { Id, Name, PageQuery, QueryBool, strictObject } from '../http/schemas.js';

export const TokensParams = strictObject({ id: Id });
export const TokenParams = strictObject({ id: Id, tokenId: Id });
export const CreateTokenBody = strictObject({
  name: Name,
  role: Type.Union([Type.Literal('admin'), Type.Literal('read')]),
  projectId: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })),
});
export const ListTokensQuery = strictObject({ showRevoked: Type.Optional(QueryBool), ...PageQuery });
