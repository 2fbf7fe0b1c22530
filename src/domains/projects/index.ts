import { defineDomain } from '../domain.js';
import { projectEndpoints } from './routes.js';

export const projectsDomain = defineDomain({
  name: 'projects',
  endpoints: (deps) => projectEndpoints(deps),
});
