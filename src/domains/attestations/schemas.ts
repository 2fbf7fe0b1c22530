import { Type } from '@sinclair/typebox';
import { component } from '../../platform/openapi/meta.js';
import { MembershipOut } from '../memberships/schemas.js';

const Jwk = Type.Object(
  {
    kty: Type.Literal('EC'),
    crv: Type.Literal('P-256'),
    x: Type.String(),
    y: Type.String(),
    kid: Type.String({ description: 'the RFC 7638 thumbprint of the key' }),
    alg: Type.Literal('ES256'),
    use: Type.Literal('sig'),
  },
  { additionalProperties: false },
);
export const ServiceJwks = component('ServiceJwks', Type.Object({ keys: Type.Array(Jwk) }, { additionalProperties: false }));

export const MembershipCheck = component(
  'MembershipCheck',
  Type.Object(
    {
      active: Type.Boolean(),
      membership: Type.Union([MembershipOut, Type.Null()], { description: 'the active membership, or null' }),
      attestation: Type.Union([Type.String({ description: 'a compact JWS (ES256) by the service key' }), Type.Null()]),
    },
    { additionalProperties: false },
  ),
);
