import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { Static, TSchema } from '@sinclair/typebox';
import { ValidationError, type FieldProblem } from '../errors.js';
import type { OperationDoc } from '../openapi/meta.js';
import type { AppContext, AppMiddleware } from './context.js';

/** One compiler for every request schema: all errors at once, defaults filled in, no coercion. */
const ajv = new Ajv({ allErrors: true, useDefaults: true, coerceTypes: false, strict: true });

export interface Schemas {
  params?: TSchema;
  query?: TSchema;
  body?: TSchema;
  /** What the OpenAPI document says of the route; its request schemas are these. */
  doc?: OperationDoc;
}

/** The schemas of each endpoint middleware: what src/openapi/ reads off the router. */
const endpoints = new WeakMap<object, Schemas>();
export const endpointSchemas = (fn: object): Schemas | undefined => endpoints.get(fn);

type Part<S, K extends keyof Schemas> = S extends Record<K, infer T extends TSchema> ? Static<T> : undefined;

/** The validated input a handler receives, typed from the same schemas ajv checks. */
export interface Input<S extends Schemas> {
  params: Part<S, 'params'>;
  query: Part<S, 'query'>;
  body: Part<S, 'body'>;
}

type Location = 'params' | 'query' | 'body';

function problems(location: Location, errors: ErrorObject[] | null | undefined): FieldProblem[] {
  return (errors ?? []).map((e) => {
    let path = e.instancePath;
    if (e.keyword === 'required') path += `/${String(e.params['missingProperty'])}`;
    if (e.keyword === 'additionalProperties') path += `/${String(e.params['additionalProperty'])}`;
    const message =
      e.keyword === 'additionalProperties' ? 'is not a known field' : e.keyword === 'required' ? 'is required' : (e.message ?? 'is invalid');
    return { in: location, path: path === '' ? '/' : path, message };
  });
}

const compiled = new WeakMap<TSchema, ValidateFunction>();
function compile(schema: TSchema): ValidateFunction {
  let fn = compiled.get(schema);
  if (!fn) {
    fn = ajv.compile(schema);
    compiled.set(schema, fn);
  }
  return fn;
}

/**
 * `endpoint(schemas, handler)` gives the route's last two middlewares: validation of path
 * parameters, query and body (all problems in one 400), then the handler with typed input.
 */
export function endpoint<S extends Schemas>(schemas: S, handler: (ctx: AppContext, input: Input<S>) => Promise<void>): AppMiddleware {
  const checks: Array<[Location, ValidateFunction | undefined]> = [
    ['params', schemas.params ? compile(schemas.params) : undefined],
    ['query', schemas.query ? compile(schemas.query) : undefined],
    ['body', schemas.body ? compile(schemas.body) : undefined],
  ];
  const middleware: AppMiddleware = async (ctx) => {
    // Query values arrive as strings, or arrays when repeated (which the string schemas refuse);
    // koa-body leaves `body` undefined when nothing was sent. Only what has a schema is copied.
    const values: Record<Location, unknown> = { params: undefined, query: undefined, body: ctx.request.body };
    const found: FieldProblem[] = [];
    for (const [location, check] of checks) {
      if (check) {
        if (location === 'params') values.params = { ...ctx.params };
        else if (location === 'query') values.query = { ...ctx.query };
        // No body is checked as `{}`: optional-only bodies pass, required fields are named.
        else if (values.body === undefined) values.body = {};
        if (!check(values[location])) found.push(...problems(location, check.errors));
      } else if (location === 'query' && ctx.querystring !== '') {
        found.push(...Object.keys(ctx.query).map((k) => ({ in: 'query' as const, path: `/${k}`, message: 'is not a known parameter' })));
      } else if (location === 'body' && values.body !== undefined && !isEmptyObject(values.body)) {
        found.push({ in: 'body', path: '/', message: 'this endpoint takes no body' });
      }
    }
    if (found.length > 0) throw new ValidationError('The request is invalid; see errors.', found);
    await handler(ctx, values as unknown as Input<S>);
  };
  endpoints.set(middleware, schemas);
  return middleware;
}

const isEmptyObject = (v: unknown): boolean =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length === 0;
