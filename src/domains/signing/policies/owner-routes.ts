import { principalOf } from '../../../access/auth/access.js';
import { principalKey } from '../../../access/auth/principal.js';
import { atProject, declare, type Declaration } from '../../../access/endpoints/declare.js';
import type { RouteDeps } from '../../../access/endpoints/route-deps.js';
import { PROJECT_CALL_503 } from '../../../platform/signer/carry-over.js';
import type { SignerClient } from '../../../platform/signer/client.js';
import { OwnersOut, PolicyParams, PutOwnersBody, PutPolicyQuery } from './schemas.js';

const key = {
  kty: 'EC',
  crv: 'P-256',
  x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU',
  y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0',
  kid: 'security-team',
};
const ownersExample = { version: 1, keys: [key], author: 'token:12', createdAt: '2026-11-24T10:00:00.000Z' };

const present = (o: { version: number; keys: unknown[]; author: string | null; createdAt: string | null }) => ({
  version: o.version,
  keys: o.keys,
  author: o.author,
  createdAt: o.createdAt,
});

/**
 * A project's policy owners (docs/signing.md, optional): P-256 public keys kept by the signer. Once a
 * project has owners, the signer takes a new policy version or owner list only signed by one.
 */
export function policyOwnerEndpoints(deps: RouteDeps & { signer: SignerClient }): Declaration[] {
  const { signer } = deps;
  return [
    declare(
      {
        method: 'PUT',
        path: '/api/v1/project/:projectId/policy/owners',
        ...atProject('policy.write'),
        write: { idempotent: false, target: { param: 'projectId' } },
      },
      {
        params: PolicyParams,
        query: PutPolicyQuery,
        body: PutOwnersBody,
        bodyLimit: 64 * 1024,
        doc: {
          operationId: 'putPolicyOwners',
          summary: "Register or change the project's policy owners",
          description:
            "The first list is written by an admin; every later one, and every policy version from then on, only as `{ signed }`: an owner's ES256 JWS over `{ projectId, version, owners }` (or `policy`). An empty list, signed by an owner, ends owner signing.",
          tag: 'Policies',
          requestExample: { keys: [key] },
          errors: {
            400: 'invalid_owners: the list cannot be read (a private key, a key of another curve, a key named twice), or the wrong form for the project.',
            403: 'owner_signature_required or invalid_owner_signature, or a token that may not write policies.',
            409: 'policy_conflict: `ifVersion` is not the newest list, or the signed version is not the next one.',
            503: PROJECT_CALL_503,
          },
          responses: { 201: { description: 'The new list.', schema: OwnersOut, example: ownersExample } },
        },
      },
      async (ctx, { scope, query, body }) => {
        const base = query.ifVersion !== undefined ? Number(query.ifVersion) : (await signer.getOwners(scope.project.uid)).version;
        const submitted = 'signed' in body ? { signed: body.signed } : { owners: body };
        ctx.status = 201;
        ctx.body = present(await signer.putOwners(scope.project.uid, submitted, base, principalKey(principalOf(ctx))));
      },
    ),

    declare(
      { method: 'GET', path: '/api/v1/project/:projectId/policy/owners', ...atProject('policy.read') },
      {
        params: PolicyParams,
        doc: {
          operationId: 'getPolicyOwners',
          summary: "The project's policy owners (version 0 and no keys: none)",
          tag: 'Policies',
          errors: { 503: PROJECT_CALL_503 },
          responses: { 200: { description: 'The newest list.', schema: OwnersOut, example: ownersExample } },
        },
      },
      async (ctx, { scope }) => {
        ctx.body = present(await signer.getOwners(scope.project.uid));
      },
    ),
  ];
}
