import type { Context } from 'koa';
import { HttpMethodEnum, koaBody } from 'koa-body';
import { PayloadTooLargeError, ValidationError } from './errors.js';
import { duplicateName } from '../../../contract/index.js';

/** Management bodies (a 1,000-item membership issue is ~150 KiB). */
export const DEFAULT_BODY_LIMIT = 1024 * 1024;
/** The wallet endpoints take a project key and an optional token: a few hundred bytes. */
export const WALLET_BODY_LIMIT = 8 * 1024;
/**
 * The shape every body must fit before it is parsed (measured on its text, measureJson): no
 * request of ours nests deeper than 3, has an object of more than a few dozen members, or holds
 * more values than a policy at the signer's limits (10,000 condition values in 100 rules) or a
 * typed-data operation at its limits (8,192 values, 32 types of 64 fields). Values are counted as
 * the text's containers and separators (`[{},{}]` counts four), which both of those stay under.
 * These bound what parsing, and every walk over a body after it, may cost.
 */
export const MAX_BODY_DEPTH = 32;
export const MAX_BODY_VALUES = 20_000;
export const MAX_OBJECT_MEMBERS = 256;

/** The methods whose requests may carry a body. */
export const BODY_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

const parsers = new Map<number, ReturnType<typeof koaBody>>();
function parserFor(limit: number): ReturnType<typeof koaBody> {
  let parser = parsers.get(limit);
  if (!parser) {
    // Read as text: the text is measured (measureJson) before JSON.parse is asked to build it.
    parser = koaBody({
      json: false,
      text: true,
      textLimit: limit,
      encoding: 'utf-8',
      multipart: false,
      urlencoded: false,
      // The idempotency fingerprint reads the raw body (ctx.request.rawBody).
      includeUnparsed: true,
      // requireJsonBody (base) has refused every other media type already; nothing reads ctx.req.body.
      textTypes: ['application/json'],
      patchNode: false,
      parsedMethods: [HttpMethodEnum.POST, HttpMethodEnum.PUT, HttpMethodEnum.PATCH, HttpMethodEnum.DELETE],
    });
    parsers.set(limit, parser);
  }
  return parser;
}

const read = new WeakSet<object>();
const noop = () => Promise.resolve();

const limitText = (bytes: number) => (bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes / 1024} KiB`);

const malformed = () => new ValidationError('The request body is not valid JSON.', undefined, 'malformed_json');
const shapeError = (message: string) => new ValidationError(`The request body ${message}.`, [{ in: 'body', path: '/', message }]);

/**
 * Reads and parses the request body once, for a matched endpoint only, up to `limit` bytes:
 * nothing is read before a route has matched and its auth kind has looked at the headers, so an
 * unauthenticated request costs at most the wallet endpoints' few KiB. The text is measured before
 * it is parsed (measureJson): a body past the depth, value or member bounds is refused at the first
 * overflow, never built.
 */
export async function readBody(ctx: Context, limit: number): Promise<void> {
  if (read.has(ctx)) return;
  read.add(ctx);
  try {
    await parserFor(limit)(ctx, noop);
  } catch (err) {
    const e = err as { status?: unknown; type?: unknown };
    if (e.status === 413 || e.type === 'entity.too.large') throw new PayloadTooLargeError(limitText(limit));
    throw err;
  }
  const text: unknown = ctx.request.body;
  if (typeof text !== 'string') return;
  // koa-body's strict JSON: no body is `{}`; a body must be an object or an array.
  if (text === '') {
    ctx.request.body = {};
    return;
  }
  if (!/^[ \t\n\r]*[[{]/.test(text)) throw malformed();
  const overflow = measureJson(text, { depth: MAX_BODY_DEPTH, values: MAX_BODY_VALUES, members: MAX_OBJECT_MEMBERS });
  if (overflow) throw shapeError(overflow);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw malformed();
  }
  // As koa-body's parser did: a key that could reach a prototype is refused (nothing here merges
  // bodies into objects, but nothing should have to be careful not to).
  if (/"(?:_|\\u005[Ff]){2}(?:p|\\u0070)(?:r|\\u0072)(?:o|\\u006[Ff])(?:t|\\u0074)(?:o|\\u006[Ff])(?:_|\\u005[Ff]){2}"\s*:/.test(text)) throw malformed();
  // JSON.parse kept the last of a repeated name; the signer or a log reader might keep the first.
  const dup = duplicateName(text);
  if (dup) {
    const path = `${dup.pointer === '/' ? '' : dup.pointer}/${dup.name.replace(/~/g, '~0').replace(/\//g, '~1')}`.slice(0, 256);
    throw new ValidationError(
      'The request body repeats a member name within one object.',
      [{ in: 'body', path, message: 'repeats a member name' }],
      'duplicate_member',
    );
  }
  (ctx.request as { body: unknown }).body = parsed;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * One pass over a JSON text, before it is parsed: the first bound it crosses (nesting deeper than
 * `depth`, more than `values` values, an object of more than `members` members), or undefined.
 * Strings are skipped by a native search for their closing quote, the rest is a character loop, and
 * the pass stops at the first bound crossed: its cost is linear in the text it reads, and it never
 * reads past the point where a hostile body turns out to be one.
 */
export function measureJson(text: string, bounds: { depth: number; values: number; members: number }): string | undefined {
  const counts = new Int32Array(bounds.depth + 2);
  const isObject = new Uint8Array(bounds.depth + 2);
  let depth = 0;
  let values = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      let end = text.indexOf('"', i + 1);
      // A quote preceded by an odd number of backslashes is escaped: look further.
      for (;;) {
        if (end < 0) return undefined;
        let slashes = 0;
        while (text.charCodeAt(end - 1 - slashes) === BACKSLASH) slashes++;
        if (slashes % 2 === 0) break;
        end = text.indexOf('"', end + 1);
      }
      i = end;
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > bounds.depth) return `nests deeper than ${bounds.depth} levels`;
      if (++values > bounds.values) return `holds more than ${bounds.values} values`;
      counts[depth] = 0;
      isObject[depth] = c === 0x7b ? 1 : 0;
    } else if (c === 0x7d || c === 0x5d) {
      if (depth > 0) depth--;
    } else if (c === 0x2c) {
      if (++values > bounds.values) return `holds more than ${bounds.values} values`;
      const n = (counts[depth] ?? 0) + 1;
      counts[depth] = n;
      // Members are counted by their commas: n commas, n + 1 members.
      if (isObject[depth] === 1 && n >= bounds.members) return `has an object of more than ${bounds.members} members`;
    }
  }
  return undefined;
}
