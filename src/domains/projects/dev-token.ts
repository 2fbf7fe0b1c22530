import { Type } from '@sinclair/typebox';
import { DEV_ISSUER, type DevIdp } from '../../access/auth/dev-idp.js';
import { atProject, declare, type Declaration } from '../../access/endpoints/declare.js';
import type { RouteDeps } from '../../access/endpoints/route-deps.js';
import { ConflictError } from '../../platform/http/errors.js';
import { tokenClaimOf } from './issuer-binding.js';
import { ProjectParams } from './schemas.js';

// Inline schemas, not components: production documents do not mount this endpoint.
const DevTokenBody = Type.Object(
  {
    email: Type.String({ minLength: 3, maxLength: 320, pattern: '^[^\\s@]+@[^\\s@]+$', description: 'The user the token is for.' }),
    emailVerified: Type.Optional(Type.Boolean({ description: 'The `email_verified` claim; default true.' })),
    ttlSeconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 86_400, description: 'Lifetime; default 3600.' })),
  },
  { additionalProperties: false },
);
const DevTokenOut = Type.Object(
  { token: Type.String(), issuer: Type.String(), audience: Type.String(), expiresAt: Type.String({ format: 'date-time' }) },
  { additionalProperties: false },
);

/**
 * `POST /project/{projectId}/dev/token` (testnet with DEV_IDP only; not mounted otherwise): an ID
 * token of the development identity provider for a project that trusts it, as a user's app would
 * hold one. Audited: whoever asks may act as any user of the project.
 */
export function devTokenEndpoints(deps: RouteDeps & { devIdp: DevIdp }): Declaration[] {
  return [
    declare(
      { method: 'POST', path: '/api/v1/project/:projectId/dev/token', ...atProject('project.change'), write: { idempotent: true, target: 'none' } },
      {
        params: ProjectParams,
        body: DevTokenBody,
        doc: {
          operationId: 'createDevToken',
          summary: "A user's ID token from the development identity provider (testnet only)",
          description: `For a project whose issuer is \`${DEV_ISSUER}\`: a token the service accepts for sign-in and signing, with the project's \`tokenClaim\` when it has one. Only in testnet deployments with DEV_IDP (the default there); production refuses DEV_IDP at start.`,
          tag: 'Projects',
          requestExample: { email: 'ada@example.com' },
          errors: { 409: `issuer_mismatch: the project trusts another issuer, not \`${DEV_ISSUER}\`.` },
          responses: {
            200: {
              description: 'The token.',
              schema: DevTokenOut,
              example: {
                token: 'eyJhbGciOiJSUzI1NiIsImtpZCI6ImRldi0uLi4ifQ.eyJlbWFpbCI6ImFkYUBleGFtcGxlLmNvbSJ9.c2ln',
                issuer: DEV_ISSUER,
                audience: 'urn:custody:testnet',
                expiresAt: '2026-11-25T13:00:00.000Z',
              },
            },
          },
        },
      },
      async (ctx, { scope, body }) => {
        if (scope.project.issuer !== DEV_ISSUER) {
          throw new ConflictError(`This project trusts ${scope.project.issuer}; set its issuer to ${DEV_ISSUER} to use development tokens.`, 'issuer_mismatch');
        }
        const claim = tokenClaimOf(scope.project);
        const audience = scope.project.audience ?? deps.config.serviceAudience;
        const ttlS = body.ttlSeconds ?? 3600;
        const now = deps.now();
        const token = await deps.devIdp.mint(ctx.state.db, {
          email: body.email,
          emailVerified: body.emailVerified ?? true,
          audience,
          ttlS,
          now,
          ...(claim ? { extraClaims: { [claim.name]: claim.value } } : {}),
        });
        ctx.body = {
          token,
          issuer: DEV_ISSUER,
          audience: deps.config.serviceAudience,
          expiresAt: new Date(Math.floor(now / 1000) * 1000 + ttlS * 1000).toISOString(),
        };
      },
    ),
  ];
}
