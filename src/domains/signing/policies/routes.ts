import { principalOf } from '../../../access/auth/access.js';
import { principalKey } from '../../../access/auth/principal.js';
import { AppError } from '../../../platform/http/errors.js';
import { atProject, declare, declareList, type Declaration } from '../../../access/endpoints/declare.js';
import type { RouteDeps } from '../../../access/endpoints/route-deps.js';
import { PROJECT_CALL_503 } from '../../../platform/signer/carry-over.js';
import type { SignerClient } from '../../../platform/signer/client.js';
import { OPERATION_BODY_BYTES } from '../../../platform/signer/limits.js';
import type { PolicyLimits } from './limits.js';
import { EvaluateBody, EvaluateOut, PolicyParams, PutPolicyBody, PolicyVersionList, PolicyVersionOut, PolicyVersionsQuery, PutPolicyQuery } from './schemas.js';

/** Operations carry calldata up to 128 KiB (hex: twice that) and policies up to 10,000 condition values: the signer's limit, less room for the envelope. */
const POLICY_BODY_LIMIT = OPERATION_BODY_BYTES;

const example = {
  rules: [
    {
      name: 'sign-in messages',
      action: 'allow',
      method: 'personal_sign',
      caller: ['user'],
      conditions: [{ field: 'message', op: 'prefix', value: 'app.example.com wants you to sign in' }],
    },
    {
      name: 'USDC to our treasury',
      action: 'allow',
      method: 'eth_signTransaction',
      abi: 'transfer(address,uint256)',
      conditions: [
        { field: 'chainId', op: 'eq', value: 8453 },
        { field: 'to', op: 'eq', value: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913' },
        { field: 'data.args.0', op: 'in', value: ['0x00000000000000000000000000000000000A11CE'] },
      ],
    },
  ],
  limits: [{ method: 'eth_signTransaction', per: 'wallet', window: '24h', count: 50 }],
};
const versionExample = { version: 3, policy: example, author: 'token:12', createdAt: '2026-11-24T10:00:00.000Z' };

const present = (v: { version: number; policy: unknown; author: string | null; createdAt: string }) => ({
  version: v.version,
  policy: v.policy,
  author: v.author,
  createdAt: v.createdAt,
});

/**
 * A project's signing policy (docs/signing.md): versions kept by the signer in its own store, write-once;
 * the API passes them through and answers in its own problem format.
 */
export function policyEndpoints(deps: RouteDeps & { signer: SignerClient; limits: PolicyLimits }): Declaration[] {
  const { signer, limits } = deps;
  return [
    declare(
      {
        method: 'PUT',
        path: '/api/v1/project/:projectId/policy',
        ...atProject('policy.write'),
        write: { idempotent: false, target: { param: 'projectId' } },
      },
      {
        params: PolicyParams,
        query: PutPolicyQuery,
        body: PutPolicyBody,
        bodyLimit: POLICY_BODY_LIMIT,
        doc: {
          operationId: 'putPolicy',
          summary: "Write a new version of the project's signing policy",
          description:
            "Default deny: a project without a policy signs nothing, and a matching `deny` beats every `allow`. The signer checks the policy (fields of each method, operators, values) and keeps it as a new, write-once version; older versions stay readable. `ifVersion` names the version this one replaces. A project with policy owners takes `{ signed }` only: an owner's ES256 JWS over `{ projectId, version, policy }`.",
          tag: 'Policies',
          requestExample: example,
          errors: {
            400: 'invalid_policy: the problem, at its JSON pointer (an unknown field for the method, an operator the field cannot take, a value of the wrong kind).',
            403: 'owner_signature_required (the project has policy owners) or invalid_owner_signature (no owner key verifies it, or it names another project), or a token that may not write policies.',
            409: 'policy_conflict: `ifVersion` is not the newest version (another change came first), or the signed version is not the next one.',
            503: PROJECT_CALL_503,
          },
          responses: { 201: { description: 'The new version.', schema: PolicyVersionOut, example: versionExample } },
        },
      },
      async (ctx, { scope, query, body }) => {
        const base = query.ifVersion !== undefined ? Number(query.ifVersion) : ((await signer.getPolicy(scope.project.uid))?.version ?? 0);
        const submitted = 'signed' in body ? { signed: body.signed } : { policy: body };
        const stored = await signer.putPolicy(scope.project.uid, submitted, base, principalKey(principalOf(ctx)));
        // Its limits apply to this process's next signature at once.
        limits.forget(scope.project.uid);
        ctx.status = 201;
        ctx.body = present(stored);
      },
    ),

    declare(
      { method: 'GET', path: '/api/v1/project/:projectId/policy', ...atProject('policy.read') },
      {
        params: PolicyParams,
        doc: {
          operationId: 'getPolicy',
          summary: "The project's signing policy (its newest version)",
          tag: 'Policies',
          errors: { 404: 'no_policy: the project has no policy, so it signs nothing.', 503: PROJECT_CALL_503 },
          responses: { 200: { description: 'The newest version.', schema: PolicyVersionOut, example: versionExample } },
        },
      },
      async (ctx, { scope }) => {
        const latest = await signer.getPolicy(scope.project.uid);
        if (!latest) throw new AppError(404, 'no_policy', 'Not Found', 'The project has no signing policy: it signs nothing.');
        ctx.body = present(latest);
      },
    ),

    declareList(
      { method: 'GET', path: '/api/v1/project/:projectId/policy/versions', ...atProject('policy.read') },
      {
        params: PolicyParams,
        query: PolicyVersionsQuery,
        doc: {
          operationId: 'listPolicyVersions',
          summary: "Every version of the project's signing policy, oldest first",
          tag: 'Policies',
          errors: { 503: PROJECT_CALL_503 },
          responses: { 200: { description: 'A page of versions.', schema: PolicyVersionList, example: { versions: [versionExample], nextCursor: null } } },
        },
      },
      async (ctx, { scope, paging }) => {
        const versions = await signer.listPolicyVersions(scope.project.uid, paging.page.afterId, paging.page.limit + 1);
        const page = paging.pageOf(versions.map((v) => ({ ...v, id: v.version })));
        ctx.body = { versions: page.items.map(present), nextCursor: page.nextCursor };
      },
    ),

    // A dry run: reads only, so read tokens may use it too.
    declare(
      {
        method: 'POST',
        path: '/api/v1/project/:projectId/policy/evaluate',
        ...atProject('policy.read'),
        readOnly: true,
      },
      {
        params: PolicyParams,
        body: EvaluateBody,
        bodyLimit: POLICY_BODY_LIMIT,
        doc: {
          operationId: 'evaluatePolicy',
          summary: 'What the policy would decide for an operation, without signing',
          description: '`caller` is `server` (the default: a backend with a signer token) or `user` (the user present, through `POST /api/v1/wallets/rpc`).',
          tag: 'Policies',
          requestExample: { caller: 'user', method: 'personal_sign', params: { message: 'app.example.com wants you to sign in with your Ethereum account' } },
          errors: { 400: 'invalid_operation: the operation cannot be read as its method defines it (the field is named).', 503: PROJECT_CALL_503 },
          responses: {
            200: {
              description: 'The decision and the rule that made it.',
              schema: EvaluateOut,
              example: { allowed: true, rule: 'sign-in messages', policyVersion: 3, digest: `0x${'ab'.repeat(32)}` },
            },
          },
        },
      },
      async (ctx, { scope, body }) => {
        ctx.body = await signer.evaluatePolicy(scope.project.uid, {
          caller: body.caller ?? 'server',
          operation: { method: body.method, params: body.params },
        });
      },
    ),
  ];
}
