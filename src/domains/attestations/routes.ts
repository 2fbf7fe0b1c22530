import { Type } from '@sinclair/typebox';
import { atProject, declare, declarePlain, type Declaration } from '../../access/endpoints/declare.js';
import type { EndpointDeps } from '../domain.js';
import { Id, strictObject } from '../../platform/http/schemas.js';
import * as ex from '../../platform/openapi/examples.js';
import { Address, MembershipType } from '../memberships/schemas.js';
import { MembershipCheck, ServiceJwks } from './schemas.js';
import { getUserWallet } from '../wallets/commands.js';
import { checkMembership } from './attest.js';
import type { ServiceKeys } from './service-keys.js';

const exampleJwk = {
  kty: 'EC',
  crv: 'P-256',
  x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU',
  y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0',
  kid: 'qM1vN9h3aGzJ4PaOuxyWb0RrmwKTymDGsyD3FCH2TkI',
  alg: 'ES256',
  use: 'sig',
};
const exampleCheck = {
  active: true,
  membership: ex.membership,
  attestation:
    'eyJhbGciOiJFUzI1NiIsImtpZCI6InFNMXZOOWgzYUd6SjRQYU91eHlXYjBScm13S1R5bURHc3lEM0ZDSDJUa0kiLCJ0eXAiOiJjdXN0b2R5LW1lbWJlcnNoaXArand0In0.eyJpc3MiOiJodHRwczovL2N1c3RvZHkuZXhhbXBsZS5jb20ifQ.c2lnbmF0dXJl',
};

const ATTESTATION =
  "The attestation is a compact JWS (ES256, `typ` custody-membership+jwt) with `iss` (PUBLIC_BASE_URL), `sub` (the wallet address), `membershipType`, `tokenId`, `status`, `projectId`, `iat` and `exp` (ATTESTATION_TTL_S, at most the membership's own expiration); anyone verifies it offline against `GET /.well-known/jwks.json`. A revoked, expired or transferred membership answers `active: false` with no attestation.";

/** The service key's public keys, and membership checks with an attestation signed by it (docs/audit.md). */
export function attestationEndpoints(deps: EndpointDeps, keys: ServiceKeys): Declaration[] {
  const signing = { db: deps.db, signer: deps.signer, issuer: deps.config.publicBaseUrl, ttlS: deps.config.attestationTtlS };
  return [
    // Plain, as the OpenAPI document is: public, outside /api/, nothing to authenticate or validate.
    declarePlain(
      { method: 'GET', path: '/.well-known/jwks.json' },
      {
        operationId: 'getServiceJwks',
        summary: "The service key's public keys",
        description:
          'Every version of the service key not yet retired (newest first), each with its `kid`: what membership attestations and audit checkpoints are verified against. A rotation in Vault shows here within SERVICE_KEYS_CACHE_MS.',
        tag: 'Operations',
        plain: true,
        errors: { 503: 'dependency_unavailable: the signer cannot answer now (Retry-After).' },
        responses: { 200: { description: 'A JSON Web Key Set.', schema: ServiceJwks, example: { keys: [exampleJwk] } } },
      },
      async (ctx) => {
        ctx.body = { keys: await keys.keys() };
        ctx.set('Cache-Control', `public, max-age=${Math.floor(deps.config.serviceKeysCacheMs / 1000)}`);
      },
    ),

    declare(
      { method: 'GET', path: '/api/v1/membership/check', ...atProject('membership.read', 'query') },
      {
        query: strictObject({ walletAddress: Address, membershipType: MembershipType, projectId: Type.Optional(Id) }),
        doc: {
          operationId: 'checkMembership',
          summary: 'Whether a wallet holds an active membership, with an attestation',
          description: ATTESTATION,
          tag: 'Memberships',
          errors: {
            404: 'not_found: `projectId` names a project outside the token’s scope.',
            503: 'dependency_unavailable: the signer cannot sign now (Retry-After).',
          },
          responses: { 200: { description: 'The check.', schema: MembershipCheck, example: exampleCheck } },
        },
      },
      async (ctx, { query, scope }) => {
        ctx.body = await checkMembership({ ...signing, db: ctx.state.db }, scope.project.id, query.walletAddress, query.membershipType, deps.now());
      },
    ),

    declare(
      { method: 'POST', path: '/api/v1/wallets/membership/check', auth: 'userJwt', user: { verify: 'afterValidation' }, readOnly: true },
      {
        body: strictObject({ key: Type.String({ maxLength: 256 }), membershipType: MembershipType }),
        doc: {
          operationId: 'checkOwnMembership',
          summary: "The user present checks their own wallet's membership",
          description: `The user present: their JWT as the bearer and the project key in the body, as for sign-in; the wallet is theirs (404 \`wallet_not_found\` until they have one). ${ATTESTATION}`,
          tag: 'Wallets',
          requestExample: { key: ex.projectKey, membershipType: 'gym:gold' },
          errors: {
            400: 'missing_project_key or invalid_project_key as for sign-in, or a body field problem.',
            401: 'missing_token or invalid_token.',
            404: 'wallet_not_found: the user has no wallet yet.',
            503: 'dependency_unavailable: the signer cannot sign now (Retry-After).',
          },
          responses: { 200: { description: 'The check.', schema: MembershipCheck, example: exampleCheck } },
        },
      },
      async (ctx, { body, user }) => {
        const wallet = await getUserWallet(ctx.state.db, user);
        ctx.body = await checkMembership({ ...signing, db: ctx.state.db }, user.project.id, wallet.address, body.membershipType, deps.now());
      },
    ),
  ];
}
