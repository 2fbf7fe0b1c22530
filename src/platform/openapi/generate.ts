import type { TSchema } from '@sinclair/typebox';
import type { Declaration } from '../../access/endpoints/declare.js';
import type { Schemas } from '../http/validate.js';
import { components, type OperationDoc, type Security } from './meta.js';
import { BODY_METHODS } from '../http/body.js';
import { API_DESCRIPTION, ERROR_EXAMPLES, GENERIC_ERRORS } from './text.js';

type Json = Record<string, unknown>;

/** Plain JSON of a TypeBox schema, each named schema (other than `root`) replaced by its $ref. */
function toJson(schema: TSchema, root?: string): unknown {
  const named = components();
  const walk = (v: unknown, top: boolean): unknown => {
    if (Array.isArray(v)) return v.map((x) => walk(x, false));
    if (typeof v !== 'object' || v === null) return v;
    const o = v as Json;
    const title = typeof o['title'] === 'string' ? o['title'] : undefined;
    if (title && named.has(title) && !(top && title === root)) return { $ref: `#/components/schemas/${title}` };
    return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, walk(x, false)]));
  };
  // JSON round trip first: TypeBox's symbol keys go, only the JSON Schema stays.
  return walk(JSON.parse(JSON.stringify(schema)), true);
}

interface Route {
  method: string;
  path: string;
  schemas: Schemas;
  doc: OperationDoc;
  security: Security;
  idempotent: boolean;
}

/** Every declared route with its docs; a route without docs is a bug the tests catch here. */
function routesOf(declarations: readonly Declaration[]): Route[] {
  return declarations.map(({ route, schemas }) => {
    if (!schemas.doc) throw new Error(`${route.method} ${route.path} has no OpenAPI doc`);
    return { method: route.method, path: route.path, schemas, doc: schemas.doc, security: route.auth, idempotent: route.write?.idempotent === true };
  });
}

/** The properties and required names of an object schema (none for anything else). */
function objectParts(schema: unknown): { properties: Record<string, TSchema>; required: string[]; type?: unknown } {
  const s = (schema ?? {}) as { properties?: Record<string, TSchema>; required?: string[]; type?: unknown };
  return { properties: s.properties ?? {}, required: s.required ?? [], type: s.type };
}

function parameters(route: Route): Json[] {
  const out: Json[] = [];
  for (const where of ['params', 'query'] as const) {
    const { properties, required: names } = objectParts(route.schemas[where]);
    for (const [name, s] of Object.entries(properties)) {
      const required = where === 'params' || names.includes(name);
      const { description, ...rest } = toJson(s) as Json;
      out.push({ name, in: where === 'params' ? 'path' : 'query', required, ...(description ? { description } : {}), schema: rest });
    }
  }
  if (route.idempotent) out.push({ $ref: '#/components/parameters/IdempotencyKey' });
  out.push({ $ref: '#/components/parameters/RequestId' });
  return out;
}

/** The statuses a route can answer besides its successes, each with what causes it. */
function errorStatuses(route: Route): Map<number, string> {
  const e = new Map<number, string>();
  const { doc, schemas, security } = route;
  if (doc.plain) {
    for (const [s, why] of Object.entries(doc.errors ?? {})) e.set(Number(s), why);
    return e;
  }
  // endpoint() refuses unknown query parameters and unexpected bodies even where it takes none.
  e.set(400, GENERIC_ERRORS[400]);
  if (security === 'apiToken') {
    e.set(401, GENERIC_ERRORS[401]);
    e.set(403, GENERIC_ERRORS[403]);
  }
  if (security === 'userJwt') e.set(401, 'missing_token, or invalid_token with a `detail` naming the JWT check that failed (docs/interface.md section 11).');
  if (schemas.params) e.set(404, GENERIC_ERRORS[404]);
  if (route.idempotent) {
    e.set(409, 'request_in_progress: a request with this Idempotency-Key is still running.');
    e.set(422, 'idempotency_key_reused: this Idempotency-Key was used for a different request.');
  }
  if (BODY_METHODS.has(route.method)) e.set(413, GENERIC_ERRORS[413]);
  if (security !== 'none') e.set(429, GENERIC_ERRORS[429]);
  e.set(503, GENERIC_ERRORS[503]);
  for (const [s, why] of Object.entries(doc.errors ?? {})) {
    const status = Number(s);
    const before = e.get(status);
    const generic = (GENERIC_ERRORS as Record<number, string | undefined>)[status];
    e.set(status, before && before !== generic ? `${before} Also: ${why}` : why);
  }
  return e;
}

const headerRefs = (names: string[]): Json => Object.fromEntries(names.map((n) => [n, { $ref: `#/components/headers/${n}` }]));

function responses(route: Route): Json {
  const out: Json = {};
  const limited = route.security !== 'none' && !route.doc.plain;
  const okHeaders = headerRefs([
    'X-Request-Id',
    ...(limited ? ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'] : []),
    ...(route.idempotent ? ['Idempotent-Replayed'] : []),
  ]);
  for (const [status, r] of Object.entries(route.doc.responses)) {
    out[status] = {
      description: r.description,
      headers: okHeaders,
      ...(r.schema
        ? { content: { [r.contentType ?? 'application/json']: { schema: toJson(r.schema), ...(r.example === undefined ? {} : { example: r.example }) } } }
        : {}),
    };
  }
  for (const [status, why] of errorStatuses(route)) {
    const retry = status === 429 || status === 503;
    out[String(status)] = {
      description: why,
      headers: headerRefs(['X-Request-Id', ...(retry ? ['Retry-After'] : []), ...(status === 401 ? ['WWW-Authenticate'] : [])]),
      content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' }, example: ERROR_EXAMPLES(status) } },
    };
  }
  return out;
}

function operation(route: Route): Json {
  const { doc, schemas } = route;
  const body = schemas.body;
  const bodyParts = objectParts(body);
  return {
    operationId: doc.operationId,
    summary: doc.summary,
    ...(doc.description ? { description: doc.description } : {}),
    tags: [doc.tag],
    security: route.security === 'none' ? [] : [{ [route.security]: [] }],
    parameters: parameters(route),
    ...(body
      ? {
          requestBody: {
            required: bodyParts.type === 'array' || bodyParts.required.length > 0,
            content: { 'application/json': { schema: toJson(body), ...(doc.requestExample === undefined ? {} : { example: doc.requestExample }) } },
          },
        }
      : {}),
    responses: responses(route),
  };
}

export interface OpenApiOptions {
  version: string;
  env: 'testnet' | 'production';
}

/** The OpenAPI 3.1 document of every declared endpoint, in the order they are mounted. */
export function buildOpenApi(declarations: readonly Declaration[], options: OpenApiOptions): Json {
  const paths: Record<string, Json> = {};
  const tags = new Set<string>();
  for (const route of routesOf(declarations)) {
    const path = route.path.replace(/:(\w+)/g, '{$1}');
    paths[path] = { ...paths[path], [route.method.toLowerCase()]: operation(route) };
    tags.add(route.doc.tag);
  }
  const schemas = Object.fromEntries([...components()].map(([name, s]) => [name, toJson(s, name)]));
  return {
    openapi: '3.1.0',
    info: {
      title: 'Custody service API',
      version: options.version,
      description: API_DESCRIPTION(options.env),
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    servers: [{ url: '/', description: `this deployment (${options.env})` }],
    tags: [...tags].map((name) => ({ name })),
    paths,
    components: {
      schemas,
      securitySchemes: {
        apiToken: {
          type: 'http',
          scheme: 'bearer',
          description:
            'An API token (`sk_test_…` / `sk_live_…`): operator, organisation or project scope; role admin (read and write) or read (GET only). docs/interface.md section 3.',
        },
        userJwt: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description:
            "The end user's OIDC ID token (RS256) from the project's registered issuer, with the project key in the body field `key`. Checked as docs/interface.md section 11 says: iss, aud, exp, nbf, email, email_verified when required.",
        },
      },
      parameters: {
        IdempotencyKey: {
          name: 'Idempotency-Key',
          in: 'header',
          required: false,
          description:
            'docs/interface.md section 2b: the first answer for (token, key) is replayed for 24 h; another request with the key → 422; concurrent → 409.',
          schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7E]+$' },
        },
        RequestId: {
          name: 'X-Request-Id',
          in: 'header',
          required: false,
          description: 'Echoed when well formed (tracing only), else generated.',
          schema: { type: 'string', maxLength: 128 },
        },
      },
      headers: {
        'X-Request-Id': { description: 'The request id, also in problem bodies and logs.', required: true, schema: { type: 'string' } },
        'Retry-After': { description: 'Seconds to wait before retrying.', required: true, schema: { type: 'integer', minimum: 0 } },
        'WWW-Authenticate': { description: 'Bearer.', schema: { type: 'string' } },
        'RateLimit-Limit': { description: 'Requests allowed in the window (when rate limits are on).', schema: { type: 'integer' } },
        'RateLimit-Remaining': { description: 'Requests left in the window.', schema: { type: 'integer' } },
        'RateLimit-Reset': { description: 'Seconds until the window resets.', schema: { type: 'integer' } },
        'Idempotent-Replayed': {
          description: '`true` when this is the stored answer to an earlier request with the same Idempotency-Key.',
          schema: { type: 'string', const: 'true' },
        },
      },
    },
  };
}
