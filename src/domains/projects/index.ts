import { defineDomain } from '../domain.js';
import { devTokenEndpoints } from './dev-token.js';
import { projectEndpoints } from './routes.js';
import { walletSecretAad } from '../webhooks/secrets.js';

const walletSecret = (column: string) => ({
  table: 'projects',
  column,
  key: ['id'],
  aad: (row: Readonly<Record<string, unknown>>) => walletSecretAad(Number(row['id'])),
});

export const projectsDomain = defineDomain({
  name: 'projects',
  sealed: [walletSecret('wallet_webhook_secret_enc'), walletSecret('wallet_webhook_secret_prev_enc')],
  endpoints: (deps) => [...projectEndpoints(deps), ...(deps.devIdp ? devTokenEndpoints({ ...deps, devIdp: deps.devIdp }) : [])],
});
