import type { Observation } from './conformance.js';

/** Every response the test HTTP client saw from the service in this run: checked against the OpenAPI document at the end. */
export const observed: Observation[] = [];

/** The service's own paths; anything else a client reaches (a receiver, the signer) is not the API's. */
const SERVICE_PATH = /^\/(api\/|healthz$|readyz$|metrics$|openapi\.json$|docs(\/|$))/;

export function observe(o: Observation): void {
  if (SERVICE_PATH.test(o.path)) observed.push(o);
}

/** Records a fetch answer whose body was read as `text`. */
export function observeResponse(method: string, url: string, res: Response, text: string): void {
  const type = res.headers.get('content-type') ?? '';
  // JSON and problem+json are parsed; NDJSON (the audit export) is lines of text.
  const body: unknown = /^application\/([a-z.+-]+\+)?json\b/.test(type) && text !== '' ? JSON.parse(text) : text === '' ? undefined : text;
  observe({ method, path: new URL(url).pathname, status: res.status, contentType: type, headers: res.headers, body });
}
