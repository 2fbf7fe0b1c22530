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
