import { defineDomain } from '../domain.js';
import { attestationEndpoints } from './routes.js';
import { ServiceKeys } from './service-keys.js';

/** The service key's public face: its JWKS and the membership attestations it signs (docs/audit.md). */
export const attestationsDomain = defineDomain({
  name: 'attestations',
  endpoints: (deps) => attestationEndpoints(deps, new ServiceKeys(deps.signer, deps.config.serviceKeysCacheMs, deps.now)),
});
