import { defineDomain } from '../domain.js';
import { tokenEndpoints } from './routes.js';

export const tokensDomain = defineDomain({
  name: 'tokens',
  endpoints: (deps) => tokenEndpoints(deps),
});
