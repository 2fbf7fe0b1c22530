import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { Static, TSchema } from '@sinclair/typebox';
import { ValidationError, type FieldProblem } from './errors.js';
import { MAX_PROBLEMS } from './problem.js';
import type { OperationDoc } from '../openapi/meta.js';
import type { AppContext, AppMiddleware } from './context.js';
import { unsafeTextAt } from '../text/safe.js';
import { BODY_METHODS, DEFAULT_BODY_LIMIT, readBody } from './body.js';

/**
 * Two compilers for every request schema, defaults filled in, no coercion: one that lists every
 * problem, for bodies small enough that listing them costs little (FULL_REPORT_BYTES), and one that
 * stops at the first, for the rest. An answer never lists more than MAX_PROBLEMS (platform/http/problem.ts).
 */
const ajvAll = new Ajv({ allErrors: true, useDefaults: true, coerceTypes: false, strict: true });
const ajvFirst = new Ajv({ allErrors: false, useDefaults: true, coerceTypes: false, strict: true });
/** A body up to this size has all its problems listed; a larger one its first. */
export const FULL_REPORT_BYTES = 16 * 1024;

export interface Schemas {
  params?: TSchema;
  query?: TSchema;
  body?: TSchema;
  /** What the OpenAPI document says of the route; its request schemas are these. */
  doc?: OperationDoc;
  /** The largest body this endpoint reads, in bytes (default DEFAULT_BODY_LIMIT). */
  bodyLimit?: number;
}

type Part<S, K extends keyof Schemas> = S extends Record<K, infer T extends TSchema> ? Static<T> : undefined;

/** The validated input a handler receives, typed from the same schemas ajv checks. */
export interface Input<S extends Schemas> {
  params: Part<S, 'params'>;
  query: Part<S, 'query'>;
  body: Part<S, 'body'>;
}

type Location = 'params' | 'query' | 'body';

function problems(location: Location, errors: ErrorObject[] | null | undefined): FieldProblem[] {
  return (errors ?? []).slice(0, MAX_PROBLEMS).map((e) => {
    let path = e.instancePath;
    if (e.keyword === 'required') path += `/${String(e.params['missingProperty'])}`;
    if (e.keyword === 'additionalProperties') path += `/${String(e.params['additionalProperty'])}`;
    const message = e.keyword === 'additionalProperties' ? 'is not a known field' : e.keyword === 'required' ? 'is required' : (e.message ?? 'is invalid');
    return { in: location, path: path === '' ? '/' : path, message };
  });
}

interface Compiled {
  all: ValidateFunction;
  first: ValidateFunction;
}
const compiled = new WeakMap<TSchema, Compiled>();
function compile(schema: TSchema): Compiled {
  let fn = compiled.get(schema);
  if (!fn) {
    fn = { all: ajvAll.compile(schema), first: ajvFirst.compile(schema) };
    compiled.set(schema, fn);
  }
  return fn;
}

/**
 * `validator(schemas)` reads the body (at the route's limit) and checks path parameters, query and
 * body, all problems in one 400; it answers the typed input. Reading twice is free (platform/http/body.ts).
 */
export function validator<S extends Schemas>(schemas: S): (ctx: AppContext) => Promise<Input<S>> {
  const checkParams = schemas.params ? compile(schemas.params) : undefined;
  const checkQuery = schemas.query ? compile(schemas.query) : undefined;
  const checkBody = schemas.body ? compile(schemas.body) : undefined;
  const limit = schemas.bodyLimit ?? DEFAULT_BODY_LIMIT;
  // The body is read here, after routing and the route's auth: see platform/http/body.ts.
  return (ctx) => (BODY_METHODS.has(ctx.method) ? readBody(ctx, limit).then(() => check(ctx)) : Promise.resolve(check(ctx)));
  function check(ctx: AppContext): Input<S> {
    // Only what has a schema is copied. Query values arrive as strings, or arrays when repeated
    // (which the string schemas refuse); koa-body leaves `body` undefined when nothing was sent.
    const found: FieldProblem[] = [];
    let params: unknown;
    let query: unknown;
    let body: unknown = ctx.request.body;
    if (checkParams) {
      params = { ...ctx.params };
      if (!checkParams.all(params)) found.push(...problems('params', checkParams.all.errors));
    }
    if (checkQuery) {
      query = { ...ctx.query };
      if (!checkQuery.all(query)) found.push(...problems('query', checkQuery.all.errors));
    } else if (ctx.querystring !== '') {
      found.push(...Object.keys(ctx.query).map((k) => ({ in: 'query' as const, path: `/${k}`, message: 'is not a known parameter' })));
    }
    if (checkBody) {
      // No body is checked as `{}`: optional-only bodies pass, required fields are named.
      body ??= {};
      const raw = (ctx.request as { rawBody?: unknown }).rawBody;
      const checkOne = typeof raw === 'string' && raw.length > FULL_REPORT_BYTES ? checkBody.first : checkBody.all;
      if (!checkOne(body)) found.push(...problems('body', checkOne.errors));
    } else if (body !== undefined && !isEmptyObject(body)) {
      found.push({ in: 'body', path: '/', message: 'this endpoint takes no body' });
    }
    // Every string a caller sends, whatever its schema: no NUL, no unpaired surrogate (src/platform/text/safe.ts).
    for (const [where, value] of [
      ['params', params ?? ctx.params],
      ['query', query ?? ctx.query],
      ['body', body],
    ] as const) {
      const at = unsafeTextAt(value);
      if (at !== undefined) found.push({ in: where, path: at === '' ? '/' : at, message: 'holds a NUL character or an unpaired surrogate' });
    }
    if (found.length > 0) throw new ValidationError('The request is invalid; see errors.', found);
    return { params, query, body } as Input<S>;
  }
}

/**
 * `endpoint(schemas, handler)` gives the route's last middleware: validation (`validator`), then
 * the handler with typed input.
 */
export function endpoint<S extends Schemas>(schemas: S, handler: (ctx: AppContext, input: Input<S>) => Promise<void>): AppMiddleware {
  const validate = validator(schemas);
  // A problem thrown while validating reaches Koa as a rejection (koa-compose).
  const middleware: AppMiddleware = (ctx) => validate(ctx).then((input) => handler(ctx, input));
  return middleware;
}

const isEmptyObject = (v: unknown): boolean => typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length === 0;

/**
 * A part of a body that its endpoint's schema leaves open (an rpc method's `params`), checked
 * against the part's own schema: the typed value, or a 400 naming each field under `at`.
 */
export function checkPart<T extends TSchema>(schema: T, value: unknown, at: string): Static<T> {
  const check = compile(schema).all;
  if (check(value)) return value;
  throw new ValidationError(
    'The request is invalid; see errors.',
    problems('body', check.errors).map((p) => ({ ...p, path: `${at}${p.path === '/' ? '' : p.path}` })),
  );
}
