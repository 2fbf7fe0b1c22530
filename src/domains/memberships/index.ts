import { defineDomain } from '../domain.js';
import { MEMBERSHIP_EVENTS } from './events.js';
import { expireMemberships } from './expiry.js';
import { membershipEndpoints } from './routes.js';

export const membershipsDomain = defineDomain({
  name: 'memberships',
  events: MEMBERSHIP_EVENTS,
  endpoints: (deps) => membershipEndpoints(deps),
  periodic: (deps) => [
    // Expirations are read on the wall clock: membership records carry real times.
    { name: 'membership-expiry', role: 'worker', everyMs: deps.config.schedulerIntervalMs, atStart: true, run: () => expireMemberships(deps.db) },
  ],
});
