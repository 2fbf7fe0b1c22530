import { defineDomain } from '../domain.js';
import { organisationEndpoints } from './routes.js';

export const organisationsDomain = defineDomain({
  name: 'organisations',
  endpoints: (deps) => organisationEndpoints(deps),
});
