import { CompactSign, exportJWK, generateKeyPair, type CryptoKey } from 'jose';

/** A policy the signing suites share: sign-in-with-Ethereum messages of one site, from the user present only. */
export const SIGN_IN_PREFIX = 'app.example.com wants you to sign in';

export const siwePolicy = {
  rules: [
    {
      name: 'sign-in messages',
      action: 'allow',
      method: 'personal_sign',
      caller: ['user'],
      conditions: [{ field: 'message', op: 'prefix', value: SIGN_IN_PREFIX }],
    },
  ],
};

/** A sign-in message that policy allows. */
export const signInMessage = { method: 'personal_sign', params: { message: `${SIGN_IN_PREFIX} with your Ethereum account` } };

/** A policy owner: a P-256 key pair, the public half as the JWK that is registered. */
export async function policyOwner(): Promise<{ privateKey: CryptoKey; jwk: { kty: string; crv: string; x: string; y: string } }> {
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
  const jwk = await exportJWK(publicKey);
  return { privateKey, jwk: { kty: 'EC', crv: 'P-256', x: jwk.x ?? '', y: jwk.y ?? '' } };
}

/** An owner's compact JWS (ES256) over a change: `{ projectId, version, <kind> }`, `projectId` the project's uid. */
export async function ownerSigned(key: CryptoKey, payload: Record<string, unknown>): Promise<string> {
  return new CompactSign(new TextEncoder().encode(JSON.stringify(payload))).setProtectedHeader({ alg: 'ES256' }).sign(key);
}
