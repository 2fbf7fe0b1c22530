// Signs a user in and signs with their wallet through @custody/client: as the user present, as
// the customer's backend with the plain client, and through the viem and ethers adapters.
// Run on your backend (never in a browser: the signer token is a secret), with
//   CUSTODY_URL, CUSTODY_PROJECT_ID, CUSTODY_PROJECT_KEY, CUSTODY_SIGNER_TOKEN and USER_JWT set.
import { CustodyApiError, CustodyClient } from '@custody/client';
import { CustodySigner } from '@custody/client/ethers';
import { toViemAccount } from '@custody/client/viem';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is not set`);
  return value;
};
const baseUrl = env('CUSTODY_URL');
const projectId = Number(env('CUSTODY_PROJECT_ID'));
const projectKey = env('CUSTODY_PROJECT_KEY');
const userJwt = env('USER_JWT');

// Sign-in needs no API token: the user's JWT (from your identity provider) and the project key.
const users = new CustodyClient({ baseUrl });
const wallet = await users.signIn(projectKey, userJwt);
console.log(JSON.stringify({ step: 'signin', walletId: wallet.walletId, walletAddress: wallet.walletAddress, isNew: wallet.isNew }));

// The user present signs with their own wallet (the policy sees caller "user").
const asUser = await users.wallets.rpc({ projectKey, userJwt }, { method: 'personal_sign', params: { message: 'Sign in to example.com' } });
console.log(JSON.stringify({ step: 'user', message: 'Sign in to example.com', ...asUser }));

// The backend signs with a signer token (caller "server"), idempotently.
const backend = new CustodyClient({ baseUrl, token: env('CUSTODY_SIGNER_TOKEN') });
const asServer = await backend.wallets.rpc(
  { projectId, walletId: wallet.walletId },
  { method: 'personal_sign', params: { message: 'Order 4711 approved' } },
  { idempotencyKey: `order-4711-${wallet.walletId}` },
);
console.log(JSON.stringify({ step: 'backend', message: 'Order 4711 approved', ...asServer }));

// Existing viem and ethers code: the same wallet as a viem account and as an ethers Signer.
const account = await toViemAccount(backend, { projectId, walletId: wallet.walletId, address: wallet.walletAddress as `0x${string}` });
const viemSignature = await account.signMessage({ message: 'Signed through viem' });
console.log(JSON.stringify({ step: 'viem', message: 'Signed through viem', signature: viemSignature }));
const signer = new CustodySigner(backend, { projectId, walletId: wallet.walletId, address: wallet.walletAddress });
const ethersSignature = await signer.signMessage('Signed through ethers');
console.log(JSON.stringify({ step: 'ethers', message: 'Signed through ethers', signature: ethersSignature }));

// A refusal is a CustodyApiError carrying the problem: 403 policy_denied names the rule.
try {
  await backend.wallets.rpc({ projectId, walletId: wallet.walletId }, { method: 'personal_sign', params: { message: 'Something the policy does not allow' } });
} catch (err) {
  if (!(err instanceof CustodyApiError)) throw err;
  console.log(JSON.stringify({ step: 'refused', status: err.status, code: err.problem?.code, detail: err.problem?.detail }));
}
