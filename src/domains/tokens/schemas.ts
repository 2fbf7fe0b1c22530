import { Type } from '@sinclair/typebox';
import { Id, IdOut, Name, NullableTimestamp, pageOf, PageQuery, QueryBool, strictObject, Timestamp } from '../../platform/http/schemas.js';
import { component } from '../../platform/openapi/meta.js';

export const TokensParams = strictObject({ id: Id });
export const TokenParams = strictObject({ id: Id, tokenId: Id });
export const CreateTokenBody = strictObject({
  name: Name,
  role: Type.Union([Type.Literal('admin'), Type.Literal('read'), Type.Literal('signer')]),
  projectId: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })),
});
export const ListTokensQuery = strictObject({ showRevoked: Type.Optional(QueryBool), ...PageQuery });

const tokenFields = {
  id: IdOut,
  name: Type.String(),
  role: Type.Union([Type.Literal('admin'), Type.Literal('read'), Type.Literal('signer')]),
  scope: Type.Union([Type.Literal('organisation'), Type.Literal('project')]),
  organisationId: IdOut,
  projectId: Type.Union([IdOut, Type.Null()]),
  createdAt: Timestamp,
  revokedAt: NullableTimestamp,
};
export const TokenOut = component('ApiToken', Type.Object(tokenFields, { additionalProperties: false }));
export const TokenList = pageOf('tokens', TokenOut);
export const TokenCreated = Type.Object(
  { ...tokenFields, token: Type.String({ pattern: '^sk_(test|live)_', description: 'shown once' }) },
  { additionalProperties: false },
);
