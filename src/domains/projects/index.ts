import { defineDomain } from '../domain.js';
import { devTokenEndpoints } from './dev-token.js';
import { projectEndpoints } from './routes.js';

export const projectsDomain = defineDomain({
  name: 'projects',
  endpoints: (deps) => [...projectEndpoints(deps), ...(deps.devIdp ? devTokenEndpoints({ ...deps, devIdp: deps.devIdp }) : [])],
});
