import { Type } from '@sinclair/typebox';
import { Id, IdOut, Name, NullableTimestamp, pageOf, PageQuery, QueryBool, strictObject, Timestamp } from '../../platform/http/schemas.js';
import { component } from '../../platform/openapi/meta.js';

export const OrganisationIdParams = strictObject({ id: Id });
export const ProjectParams = strictObject({ projectId: Id });

const Url = Type.String({ minLength: 1, maxLength: 2048 });
const TokenClaim = Type.Object(
  {
    name: Type.String({ pattern: '^[A-Za-z0-9_.:-]{1,64}$', description: 'a top-level claim of the JWT, e.g. azp, client_id, tid' }),
    value: Type.String({ minLength: 1, maxLength: 256 }),
  },
  {
    additionalProperties: false,
    description:
      'A claim every user JWT must carry with this value (a string equal to it, or a list holding it): what binds tokens to this project when other organisations trust the same issuer.',
  },
);

/** The audience of the project's user tokens, when not the service's (see docs/identity-providers.md). */
const Audience = Type.String({
  minLength: 1,
  maxLength: 256,
  pattern: '^[\\x21-\\x7E]+$',
  description:
    "The audience (`aud`) this project's user tokens carry instead of the service's: the client id of the customer's application, for providers whose ID tokens cannot carry the service's audience. Null: the service's audience.",
});

export const CreateProjectBody = strictObject({
  name: Name,
  issuer: Url,
  walletWebhookUrl: Type.Optional(Url),
  walletWebhookSecret: Type.Optional(Type.String({ minLength: 16, maxLength: 256 })),
  requireVerifiedEmail: Type.Optional(Type.Boolean({ default: true })),
  tokenClaim: Type.Optional(Type.Union([TokenClaim, Type.Null()])),
  audience: Type.Optional(Type.Union([Audience, Type.Null()])),
});

/** Only the fields given change; `walletWebhookUrl: null` removes the wallet webhook. */
export const UpdateProjectBody = Type.Object(
  {
    name: Type.Optional(Name),
    issuer: Type.Optional(Url),
    walletWebhookUrl: Type.Optional(Type.Union([Url, Type.Null()])),
    requireVerifiedEmail: Type.Optional(Type.Boolean()),
    tokenClaim: Type.Optional(Type.Union([TokenClaim, Type.Null()])),
    audience: Type.Optional(Type.Union([Audience, Type.Null()])),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const RotateKeyBody = strictObject({
  graceSeconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 30 * 86_400, default: 86_400 })),
});

export const ListProjectsQuery = strictObject({ showDeleted: Type.Optional(QueryBool), ...PageQuery });

const Environment = Type.Union([Type.Literal('testnet'), Type.Literal('production')]);
const projectFields = {
  id: IdOut,
  uid: Type.String({
    format: 'uuid',
    description: "The project's random identity, never reused: policy owners sign over it (`projectId` of a signed policy or owner list).",
  }),
  organisationId: IdOut,
  name: Type.String(),
  environment: Environment,
  issuer: Type.String(),
  walletWebhookUrl: Type.Union([Type.String(), Type.Null()]),
  requireVerifiedEmail: Type.Boolean(),
  tokenClaim: Type.Union([TokenClaim, Type.Null()]),
  audience: Type.Union([Type.String(), Type.Null()]),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  deletedAt: NullableTimestamp,
};
export const ProjectOut = component('Project', Type.Object(projectFields, { additionalProperties: false }));
export const ProjectList = pageOf('projects', ProjectOut);
/** Creation shows the project key (and a generated wallet-webhook secret) once. */
export const ProjectCreated = Type.Object(
  {
    ...projectFields,
    projectKey: Type.String({ pattern: '^pk_(test|live)_', description: 'shown once' }),
    walletWebhookSecret: Type.Optional(Type.String({ description: 'shown once, when the service generated it' })),
  },
  { additionalProperties: false },
);
export const KeyRotated = Type.Object(
  { projectKey: Type.String({ pattern: '^pk_(test|live)_', description: 'shown once' }), previousKeysExpireAt: Timestamp },
  { additionalProperties: false },
);
export const WalletWebhookSecretRotated = Type.Object(
  { walletWebhookSecret: Type.String({ description: 'shown once' }), previousSecretExpiresAt: Timestamp },
  { additionalProperties: false },
);
