import type { Context } from 'koa';
import { HttpMethodEnum, koaBody } from 'koa-body';
import { PayloadTooLargeError, ValidationError } from '../errors.js';
import { duplicateName } from '../text/json-names.js';

/** Management bodies (a 1,000-item membership issue is ~150 KiB). */
export const DEFAULT_BODY_LIMIT = 1024 * 1024;
/** The wallet endpoints take a project key and an optional token: a few hundred bytes. */
export const WALLET_BODY_LIMIT = 8 * 1024;
/** No request of ours nests deeper than 3; this bounds what any walk over a body may meet. */
export const MAX_BODY_DEPTH = 32;

/** The methods whose requests may carry a body. */
export const BODY_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

const parsers = new Map<number, ReturnType<typeof koaBody>>();
function parserFor(limit: number): ReturnType<typeof koaBody> {
  let parser = parsers.get(limit);
  if (!parser) {
    parser = koaBody({
      json: true,
      jsonStrict: true,
      jsonLimit: limit,
      multipart: false,
      urlencoded: false,
      text: false,
      // The idempotency fingerprint reads the raw body (ctx.request.rawBody).
      includeUnparsed: true,
      // requireJsonBody (base) has refused every other media type already; nothing reads ctx.req.body.
      jsonTypes: ['application/json'],
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

/**
 * Reads and parses the request body once, for a matched endpoint only, up to `limit` bytes:
 * nothing is read before a route has matched and its auth kind has looked at the headers, so an
 * unauthenticated request costs at most the wallet endpoints' few KiB. A body nested deeper than
 * MAX_BODY_DEPTH is refused before anything walks it.
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
  if (depthOver(ctx.request.body, MAX_BODY_DEPTH)) {
    throw new ValidationError(`The request body nests deeper than ${MAX_BODY_DEPTH} levels.`, [
      { in: 'body', path: '/', message: `nests deeper than ${MAX_BODY_DEPTH} levels` },
    ]);
  }
  // JSON.parse kept the last of a repeated name; the signer or a log reader might keep the first.
  const raw = (ctx.request as { rawBody?: unknown }).rawBody;
  const dup = typeof raw === 'string' ? duplicateName(raw) : undefined;
  if (dup) {
    const path = `${dup.pointer === '/' ? '' : dup.pointer}/${dup.name.replace(/~/g, '~0').replace(/\//g, '~1')}`.slice(0, 256);
    throw new ValidationError(
      'The request body repeats a member name within one object.',
      [{ in: 'body', path, message: 'repeats a member name' }],
      'duplicate_member',
    );
  }
}

/** Whether a parsed JSON value nests deeper than `max`, without recursion (an explicit stack). */
export function depthOver(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const [v, depth] = item;
    if (v === null || typeof v !== 'object') continue;
    if (depth >= max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
    }
  }
  return false;
}
