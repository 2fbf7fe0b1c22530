import SwaggerParser from '@apidevtools/swagger-parser';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { OpenAPIV3_1 } from 'openapi-types';

// ajv-formats is CommonJS: its default export arrives as the module object under ESM.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

/** Ajv for the document's JSON Schema 2020-12, with formats (date-time), OpenAPI keywords tolerated. */
export function schemaValidator(): Ajv2020 {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  return ajv;
}

/** One response seen by a test: what the conformance check compares with the document. */
export interface Observation {
  method: string;
  /** The path without the query string. */
  path: string;
  status: number;
  contentType: string;
  /** The answer's headers, when the observer kept them: headers the document marks required are checked. */
  headers?: Headers;
  body: unknown;
}

interface Operation {
  method: string;
  template: string;
  pattern: RegExp;
  /** Fewer template parameters win: `/webhooks/failedDeliveries` before `/webhooks/{webhookId}`. */
  params: number;
  responses: Record<string, OpenAPIV3_1.ResponseObject>;
}

const mediaType = (contentType: string) => contentType.split(';')[0]?.trim().toLowerCase() ?? '';

/** Checks observed responses against an OpenAPI 3.1 document: documented status, media type and body schema. */
export class Conformance {
  readonly #ops: Operation[];
  readonly #ajv: Ajv2020;
  readonly #compiled = new Map<object, ValidateFunction>();
  readonly #problem: object;

  private constructor(doc: OpenAPIV3_1.Document) {
    this.#ajv = schemaValidator();
    this.#ops = [];
    for (const [template, item] of Object.entries(doc.paths ?? {})) {
      for (const method of ['get', 'post', 'put', 'delete', 'patch'] as const) {
        const op = item?.[method];
        if (!op) continue;
        const source = template
          .split('/')
          .map((seg) => (seg.startsWith('{') ? '[^/]+' : seg.replace(/[.*+?^$()|[\]\\]/g, '\\$&')))
          .join('/');
        this.#ops.push({
          method: method.toUpperCase(),
          template,
          pattern: new RegExp(`^${source}$`),
          params: (template.match(/\{/g) ?? []).length,
          responses: op.responses as Record<string, OpenAPIV3_1.ResponseObject>,
        });
      }
    }
    this.#ops.sort((a, b) => a.params - b.params);
    this.#problem = doc.components?.schemas?.['Problem'] ?? {};
  }

  /** From the served document; $refs resolved first so every schema stands alone. */
  static async of(doc: unknown): Promise<Conformance> {
    const resolved = (await SwaggerParser.dereference(structuredClone(doc) as OpenAPIV3_1.Document)) as OpenAPIV3_1.Document;
    return new Conformance(resolved);
  }

  #validate(schema: object, value: unknown): string | undefined {
    let fn = this.#compiled.get(schema);
    if (!fn) {
      fn = this.#ajv.compile(schema);
      this.#compiled.set(schema, fn);
    }
    return fn(value) ? undefined : this.#ajv.errorsText(fn.errors);
  }

  /** The problems with one observation; empty when it matches the document. */
  check(o: Observation): string[] {
    const where = `${o.method} ${o.path} → ${o.status}`;
    const type = mediaType(o.contentType);
    // The router ignores one trailing slash, as the document's paths do.
    const path = o.path.length > 1 ? o.path.replace(/\/$/, '') : o.path;
    const candidates = this.#ops.filter((op) => op.pattern.test(path));
    const op = candidates.find((c) => c.method === o.method);
    if (!op) {
      // No such operation: only the service's own 404/405 (or an OPTIONS answer) are fine.
      if (o.method === 'OPTIONS' && candidates.length > 0 && o.status === 204) return [];
      if (o.method === 'HEAD' && candidates.some((c) => c.method === 'GET')) return [];
      // A body that is not acceptable JSON (400, 413) is refused before routing, as the document says.
      const expected = [candidates.length > 0 ? 405 : 404, 400, 413];
      if (!expected.includes(o.status)) return [`${where}: not a documented operation, so one of ${expected.join(', ')} was expected`];
      if (type !== 'application/problem+json') return [`${where}: ${type} instead of application/problem+json`];
      const err = this.#validate(this.#problem, o.body);
      return err ? [`${where}: problem body: ${err}`] : [];
    }
    const response = op.responses[String(o.status)];
    if (!response) return [`${where}: status not documented for ${op.method} ${op.template}`];
    const missing = Object.entries(response.headers ?? {})
      .filter(([name, h]) => (h as OpenAPIV3_1.HeaderObject).required === true && o.headers !== undefined && !o.headers.has(name))
      .map(([name]) => `${where}: the required header ${name} is missing`);
    if (missing.length > 0) return missing;
    const content = response.content ?? {};
    const media = Object.keys(content);
    if (media.length === 0) return o.body === undefined || o.body === '' ? [] : [`${where}: documented without a body, answered with one`];
    const key = media.find((m) => m === type) ?? media.find((m) => m === '*/*' || (m.endsWith('/*') && type.startsWith(m.slice(0, -1))));
    if (!key) return [`${where}: ${type || 'no content type'} is not one of ${media.join(', ')}`];
    const schema = content[key]?.schema;
    if (!schema || !/json/.test(key)) return [];
    const err = this.#validate(schema, o.body);
    return err ? [`${where}: body does not match ${op.template}: ${err}`] : [];
  }
}
