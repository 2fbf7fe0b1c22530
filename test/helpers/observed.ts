import type { Observation } from './conformance.js';

/** Every response the test HTTP client saw from the service in this run: checked against the OpenAPI document at the end. */
export const observed: Observation[] = [];

/** The service's own paths; anything else a client reaches (a receiver, the signer) is not the API's. */
const SERVICE_PATH = /^\/(api\/|healthz$|readyz$|metrics$|openapi\.json$|docs(\/|$))/;

export function observe(o: Observation): void {
  if (SERVICE_PATH.test(o.path)) observed.push(o);
}
