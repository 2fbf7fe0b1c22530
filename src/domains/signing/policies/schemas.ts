import { Type } from '@sinclair/typebox';
import {
  CALLERS,
  LIMIT_SCOPES,
  LIMIT_WINDOWS,
  OPERATORS,
  OWNER_KEYS_MAX,
  POLICY_BOUNDS,
  RULE_ACTIONS,
  SIGNING_METHODS,
  type LimitWindow,
} from '../../../../contract/index.js';
import { Id, pageOf, PageQuery, strictObject, Timestamp } from '../../../platform/http/schemas.js';
import { component } from '../../../platform/openapi/meta.js';

/**
 * A signing policy's shape (docs/signing.md). The signer reads it again strictly and is the judge of
 * its meaning (the field catalogue per method, values of the right kind); these schemas give the
 * shape its first check here and its OpenAPI description. Every list and bound is the contract's.
 */
export const Method = Type.Union(
  SIGNING_METHODS.map((m) => Type.Literal(m)),
  { description: 'an Ethereum JSON-RPC signing method' },
);
const Caller = Type.Union(CALLERS.map((c) => Type.Literal(c)));
const Scalar = Type.Union([Type.String({ maxLength: POLICY_BOUNDS.textChars }), Type.Number(), Type.Boolean()]);
const Operator = Type.Union(
  OPERATORS.map((op) => Type.Literal(op)),
  { description: '`lt`…`gte` compare quantities as big integers; `prefix` compares text; `in`/`not_in` take a list' },
);

const Condition = strictObject({
  field: Type.String({
    minLength: 1,
    maxLength: 100,
    description: "a field of the method's catalogue, `message.<path>` of typed data or `data.args.<n>` of a call",
  }),
  op: Operator,
  value: Type.Union([Scalar, Type.Array(Scalar, { minItems: 1, maxItems: POLICY_BOUNDS.valuesPerList })]),
});

const Rule = strictObject({
  name: Type.String({ minLength: 1, maxLength: POLICY_BOUNDS.ruleNameChars }),
  action: Type.Union(RULE_ACTIONS.map((a) => Type.Literal(a))),
  method: Method,
  caller: Type.Optional(Type.Array(Caller, { minItems: 1, maxItems: 2 })),
  abi: Type.Optional(Type.String({ minLength: 3, maxLength: 300, description: 'a function signature such as transfer(address,uint256), for `data.args.<n>`' })),
  conditions: Type.Optional(Type.Array(Condition, { maxItems: POLICY_BOUNDS.conditionsPerRule })),
});

const limitOf = {
  method: Method,
  per: Type.Union(LIMIT_SCOPES.map((s) => Type.Literal(s))),
  window: Type.Union((Object.keys(LIMIT_WINDOWS) as LimitWindow[]).map((w) => Type.Literal(w))),
};
// Signatures counted, or a budget: wei of the maximum cost of the transactions signed.
const Limit = Type.Union([
  strictObject({ ...limitOf, count: Type.Integer({ minimum: 1, maximum: POLICY_BOUNDS.limitCount }) }),
  strictObject({ ...limitOf, wei: Type.String({ pattern: '^[1-9][0-9]{0,77}$', description: 'a budget: wei of maximum cost (gas × fee cap + value)' }) }),
]);

export const PolicyBody = component(
  'Policy',
  strictObject({
    rules: Type.Array(Rule, { maxItems: POLICY_BOUNDS.rules }),
    limits: Type.Optional(Type.Array(Limit, { maxItems: POLICY_BOUNDS.limits })),
  }),
);

/** A change signed by a policy owner (docs/signing.md): the compact ES256 JWS over `{ projectId, version, <document> }`. */
export const SignedBody = strictObject({
  signed: Type.String({
    minLength: 1,
    maxLength: 1024 * 1024,
    description:
      "an owner's compact JWS (ES256) whose payload is `{ projectId, version, policy }` (or `owners`): the project id as a string, the version it becomes",
  }),
});
export const PutPolicyBody = Type.Union([PolicyBody, SignedBody], {
  description: 'The policy; when the project has policy owners, the signed form only.',
});

const OwnerKey = strictObject({
  kty: Type.Literal('EC'),
  crv: Type.Literal('P-256'),
  x: Type.String({ pattern: '^[A-Za-z0-9_-]{43}$' }),
  y: Type.String({ pattern: '^[A-Za-z0-9_-]{43}$' }),
  kid: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
});
export const OwnersDocument = strictObject({
  keys: Type.Array(OwnerKey, { maxItems: OWNER_KEYS_MAX, description: 'P-256 public JWKs; an empty list ends owner signing' }),
});
export const PutOwnersBody = Type.Union([OwnersDocument, SignedBody], {
  description: 'The owner list; once the project has owners, the signed form only.',
});
export const OwnersOut = component(
  'PolicyOwners',
  strictObject({
    version: Type.Integer({ minimum: 0, description: '0: the project has no owners (its admins write policies)' }),
    keys: Type.Array(OwnerKey),
    author: Type.Union([Type.String(), Type.Null()]),
    createdAt: Type.Union([Timestamp, Type.Null()]),
  }),
);

export const PolicyParams = strictObject({ projectId: Id });
export const PutPolicyQuery = strictObject({
  ifVersion: Type.Optional(
    Type.String({ pattern: '^(0|[1-9][0-9]{0,8})$', description: 'the version this change replaces (0: none); 409 policy_conflict when it is not the newest' }),
  ),
});

export const PolicyVersionOut = component(
  'PolicyVersion',
  strictObject({
    version: Type.Integer({ minimum: 1 }),
    policy: PolicyBody,
    author: Type.Union([Type.String(), Type.Null()], { description: 'who wrote it: `operator` or `token:<id>`' }),
    createdAt: Timestamp,
  }),
);
export const PolicyVersionList = pageOf('versions', PolicyVersionOut);
export const PolicyVersionsQuery = strictObject({ ...PageQuery });

export const EvaluateBody = strictObject({
  caller: Type.Optional(Caller),
  method: Method,
  params: Type.Object({}, { description: "the method's parameters, as `POST …/wallets/rpc` takes them" }),
});
export const EvaluateOut = strictObject({
  allowed: Type.Boolean(),
  rule: Type.Union([Type.String(), Type.Null()], { description: 'the rule that decided; null: no rule allows this' }),
  policyVersion: Type.Integer({ minimum: 0, description: '0: the project has no policy (it signs nothing)' }),
  digest: Type.String({ pattern: '^0x[0-9a-f]{64}$', description: 'what would be signed' }),
});
