import type { TSchema } from '@sinclair/typebox';

/** How an operation is authenticated: an API token, a project key with the end user's JWT, or nothing. */
export type Security = 'apiToken' | 'userJwt' | 'none';

export interface ResponseDoc {
  description: string;
  /** Omitted: no body (204). */
  schema?: TSchema;
  /** Default application/json. */
  contentType?: string;
  example?: unknown;
}

/** What the OpenAPI document says of one route beyond its request schemas. */
export interface OperationDoc {
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  /** Set by `declare` from the route's auth (the document itself reads the route). */
  security?: Security;
  /** The answers a correct request gets, by status. */
  responses: Record<number, ResponseDoc>;
  /** Errors particular to this route (status → what causes it); the common ones are added. */
  errors?: Record<number, string>;
  /** An example request body. */
  requestExample?: unknown;
  /** No automatic error statuses (health, metrics, the reference itself): only `errors`. */
  plain?: boolean;
}

/** Schemas the document lists under components.schemas, found again by their `title`. */
const named = new Map<string, TSchema>();
export function component<T extends TSchema>(title: string, schema: T): T {
  const s = { ...schema, title } as T;
  named.set(title, s);
  return s;
}
export const components = (): ReadonlyMap<string, TSchema> => named;
