import { Type } from '@sinclair/typebox';
import { Id, Name, PageQuery, QueryBool, strictObject } from '../http/schemas.js';

export const OrganisationIdParams = strictObject({ id: Id });
export const ProjectParams = strictObject({ projectId: Id });

const Url = Type.String({ minLength: 1, maxLength: 2048 });

export const CreateProjectBody = strictObject({
  name: Name,
  issuer: Url,
  walletWebhookUrl: Type.Optional(Url),
  walletWebhookSecret: Type.Optional(Type.String({ minLength: 16, maxLength: 256 })),
  requireVerifiedEmail: Type.Optional(Type.Boolean({ default: true })),
});

/** Only the fields given change; `walletWebhookUrl: null` removes the wallet webhook. */
export const UpdateProjectBody = Type.Object(
  {
    name: Type.Optional(Name),
    issuer: Type.Optional(Url),
    walletWebhookUrl: Type.Optional(Type.Union([Url, Type.Null()])),
    requireVerifiedEmail: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const RotateKeyBody = strictObject({
  graceSeconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 30 * 86_400, default: 86_400 })),
});

export const ListProjectsQuery = strictObject({ showDeleted: Type.Optional(QueryBool), ...PageQuery });
