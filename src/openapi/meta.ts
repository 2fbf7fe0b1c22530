import type { TSchema } from '@sinclair/typebox';
import type { AppMiddleware } from '../http/context.js';

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
  /** Default: derived from the route's middlewares (`apiToken` when it authenticates). */
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

/** Middlewares that say something about the routes they guard. */
export type Mark = 'authenticate' | 'idempotent';
const marks = new WeakMap<object, Mark>();

export function mark<F extends object>(fn: F, what: Mark): F {
  marks.set(fn, what);
  return fn;
}
export const markOf = (fn: object): Mark | undefined => marks.get(fn);

/** Docs of middlewares that end a route without `endpoint()` (health, metrics, the reference page). */
const described = new WeakMap<object, OperationDoc>();
export function describe(doc: OperationDoc, fn: AppMiddleware): AppMiddleware {
  described.set(fn, doc);
  return fn;
}
export const describedOf = (fn: object): OperationDoc | undefined => described.get(fn);

/** Schemas the document lists under components.schemas, found again by their `title`. */
const named = new Map<string, TSchema>();
export function component<T extends TSchema>(title: string, schema: T): T {
  const s = { ...schema, title } as T;
  named.set(title, s);
  return s;
}
export const components = (): ReadonlyMap<string, TSchema> => named;
