import { defineDomain } from '../domain.js';
import { auditEndpoints } from './routes.js';

export const auditDomain = defineDomain({
  name: 'audit',
  endpoints: (deps) => auditEndpoints(deps),
});
