import { Type } from '@sinclair/typebox';
import { Id, pageOf, PageQuery, strictObject, Timestamp } from '../http/schemas.js';
import { component } from '../openapi/meta.js';

/**
 * A signing policy's shape (SIGNING.md). The signer reads it again strictly and is the judge of
 * its meaning (the field catalogue per method, values of the right kind); these schemas give the
 * shape its first check here and its OpenAPI description.
 */
export const SIGNING_METHODS = ['personal_sign', 'eth_signTypedData_v4', 'eth_signTransaction', 'eth_signAuthorization'] as const;
export const Method = Type.Union(
  SIGNING_METHODS.map((m) => Type.Literal(m)),
  { description: 'an Ethereum JSON-RPC signing method' },
);
const Caller = Type.Union([Type.Literal('user'), Type.Literal('server')]);
const Scalar = Type.Union([Type.String({ maxLength: 1024 }), Type.Number(), Type.Boolean()]);
const Operator = Type.Union(
  ['eq', 'neq', 'in', 'not_in', 'lt', 'lte', 'gt', 'gte', 'prefix'].map((op) => Type.Literal(op)),
  { description: '`lt`…`gte` compare quantities as big integers; `prefix` compares text; `in`/`not_in` take a list' },
);

const Condition = strictObject({
  field: Type.String({
    minLength: 1,
    maxLength: 100,
    description: "a field of the method's catalogue, `message.<path>` of typed data or `data.args.<n>` of a call",
  }),
  op: Operator,
  value: Type.Union([Scalar, Type.Array(Scalar, { minItems: 1, maxItems: 1000 })]),
});

const Rule = strictObject({
  name: Type.String({ minLength: 1, maxLength: 100 }),
  action: Type.Union([Type.Literal('allow'), Type.Literal('deny')]),
  method: Method,
  caller: Type.Optional(Type.Array(Caller, { minItems: 1, maxItems: 2 })),
  abi: Type.Optional(Type.String({ minLength: 3, maxLength: 300, description: 'a function signature such as transfer(address,uint256), for `data.args.<n>`' })),
  conditions: Type.Optional(Type.Array(Condition, { maxItems: 16 })),
});

const Limit = strictObject({
  method: Method,
  per: Type.Union([Type.Literal('wallet'), Type.Literal('project')]),
  window: Type.Union(['1m', '1h', '24h', '7d', '30d'].map((w) => Type.Literal(w))),
  count: Type.Integer({ minimum: 1, maximum: 1_000_000_000 }),
});

export const PolicyBody = component(
  'Policy',
  strictObject({
    rules: Type.Array(Rule, { maxItems: 100 }),
    limits: Type.Optional(Type.Array(Limit, { maxItems: 16 })),
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
