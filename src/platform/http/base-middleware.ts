import { httpDuration, httpRequests } from '../logging/metrics.js';
import { randomUUID } from 'node:crypto';
import type { Context, Middleware } from 'koa';
import { accessLine, type Logger } from '../logging/logger.js';
import type { AppState } from './context.js';
import type { Principal } from '../../access/auth/principal.js';
import type { Executor } from '../db/knex.js';
import { INTERNAL_ERROR, sendProblem, toAppError } from './problem.js';
import { BODY_METHODS } from './body.js';
import { KeyConflictError, ValidationError } from './errors.js';

const CALLER_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * A request's state. Its child logger costs a serialisation, and most requests never log beyond
 * the access line, so it is made on first use only (a getter of the class: adding one to each
 * request's object made every later property access on it slower).
 */
class RequestState implements AppState {
  principal?: Principal;
  idempotentAnswer?: AppState['idempotentAnswer'];
  #child: Logger | undefined;

  constructor(
    readonly requestId: string,
    private readonly parentLog: Logger,
    public db: Executor,
  ) {}

  get log(): Logger {
    return (this.#child ??= this.parentLog.child({ requestId: this.requestId }));
  }
}

/**
 * What every request goes through first, in this order (one middleware, not four: each layer of
 * Koa's chain costs a promise and a call on every request):
 * 1. its id: a caller's well-formed X-Request-Id is echoed (for tracing only), else one is made;
 * 2. one access line and the HTTP metrics once it is answered: method, route pattern, status,
 *    duration; never headers, query or body;
 * 3. anything thrown below becomes problem+json; unknown errors are logged and answered as a
 *    bare 500;
 * 4. a body must be UTF-8 JSON (docs/interface.md section 2: wrong Content-Type is a 400, never a 500).
 */
export function base(log: Logger, db: Executor): Middleware<AppState> {
  const access = accessLine(log);
  return async (ctx, next) => {
    const started = performance.now();
    const given = ctx.get('X-Request-Id');
    const id = CALLER_REQUEST_ID.test(given) ? given : randomUUID();
    ctx.state = new RequestState(id, log, db);
    ctx.set('X-Request-Id', id);
    try {
      requireJsonBody(ctx);
      await next();
    } catch (err) {
      const known = toAppError(err);
      if (known) {
        if (known instanceof KeyConflictError)
          ctx.state.log.error({ code: known.code, reason: known.reason, err: known.why }, 'key conflict: a key store shared between deployments or restored');
        else if (known.status >= 500) ctx.state.log.warn({ code: known.code, err: describe(err) }, 'dependency failure');
        sendProblem(ctx, known, id);
      } else {
        ctx.state.log.error({ err: describe(err) }, 'unhandled error');
        sendProblem(ctx, INTERNAL_ERROR, id);
      }
    } finally {
      lingerOnUnreadBody(ctx);
      const ms = performance.now() - started;
      // The route pattern, not the path: ids must not become label values.
      const matched = (ctx as { _matchedRoute?: string | RegExp })._matchedRoute;
      const route = typeof matched === 'string' ? matched : 'unmatched';
      httpRequests.inc({ method: ctx.method, route, status: String(ctx.status) });
      httpDuration.observe({ method: ctx.method, route }, ms / 1000);
      access(id, ctx.method, ctx.path, ctx.status, Math.round(ms * 10) / 10);
    }
  };
}

/** A log-safe description of an error: name, code and stack, never request data. */
function describe(err: unknown): Record<string, unknown> {
  if (err instanceof Error) {
    return { name: err.name, code: (err as { code?: unknown }).code, message: err.message, stack: err.stack };
  }
  return { value: typeof err };
}

/** A body the answer did not need, above this, is not drained: the connection is closed after the answer. */
const DRAIN_LIMIT = 64 * 1024;
/** How long a client gets to take the answer before a lingering connection is cut. */
const LINGER_MS = 5_000;

/**
 * Answered without reading a large body (no route, no valid credentials, over the endpoint's
 * limit)? Node would read and discard the rest: the caller's megabytes at our CPU's and the
 * collector's expense. Instead the answer says `Connection: close`, Node is told the body is being
 * consumed (so it does not drain it), and once the answer is written the connection stays paused
 * and half-closes: the client takes the answer and hangs up, or is cut after LINGER_MS. (Node's
 * own close would reset a connection with unread bytes, and the client would lose the answer.)
 */
function lingerOnUnreadBody(ctx: Context): void {
  const req = ctx.req as typeof ctx.req & { _consuming?: boolean };
  // Fully received (read, or small enough to have arrived whole), or still being read: nothing to do.
  if (!BODY_METHODS.has(ctx.method) || req.complete || req.readableFlowing === true) return;
  const length = ctx.request.length;
  if (!((length !== undefined && length > DRAIN_LIMIT) || (length === undefined && ctx.get('Transfer-Encoding') !== ''))) return;
  ctx.set('Connection', 'close');
  // Node's server drains an unread body at the end of the response unless it is being consumed.
  req._consuming = true;
  const socket = req.socket;
  socket.destroySoon = () => {
    socket.pause();
    socket.end();
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  };
}
/** `application/json`, alone or with a UTF-8 charset, in any case. */
const PLAIN_JSON = /^application\/json(; ?charset=(utf-8|"utf-8"|utf8))?$/i;

/** A body must be JSON (docs/interface.md section 2: wrong Content-Type is a 400, never a 500). */
function requireJsonBody(ctx: Context): void {
  if (!BODY_METHODS.has(ctx.method)) return;
  const hasBody = ctx.request.length > 0 || ctx.get('Transfer-Encoding') !== '';
  if (!hasBody) return;
  const type = ctx.get('Content-Type');
  // What nearly every client sends needs no parsing.
  if (PLAIN_JSON.test(type)) return;
  // JSON is UTF-8 (RFC 8259); a declared other charset would be decoded wrongly.
  const charset = /;\s*charset=("?)([^";]*)\1/i.exec(type)?.[2]?.toLowerCase();
  if (ctx.is('application/json') !== 'application/json' || (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8')) {
    throw new ValidationError('Request bodies must be UTF-8 JSON with Content-Type: application/json.', undefined, 'unsupported_media_type');
  }
}
