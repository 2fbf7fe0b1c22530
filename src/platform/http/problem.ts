import type { Context } from 'koa';
import { AppError, DependencyUnavailableError, PayloadTooLargeError, ValidationError, type FieldProblem } from './errors.js';
import { UnknownDataKeyError } from '../crypto/secrets.js';
import { mapDatabaseError } from '../db/pg-errors.js';

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  requestId: string;
  errors?: FieldProblem[];
}

/** Errors raised by koa-body / co-body / raw-body while reading a request body. */
function bodyParserError(err: unknown): AppError | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const e = err as { type?: unknown; status?: unknown; statusCode?: unknown; code?: unknown };
  // zlib, for a Content-Encoding (gzip, deflate, br) whose body does not decode.
  if (typeof e.code === 'string' && /^(Z_|ERR_BROTLI|ERR__)/.test(e.code)) {
    return new ValidationError('The request body could not be decoded as its Content-Encoding says.', undefined, 'malformed_json');
  }
  const status = typeof e.status === 'number' ? e.status : typeof e.statusCode === 'number' ? e.statusCode : undefined;
  if (e.type === 'entity.too.large' || status === 413) return new PayloadTooLargeError('1 MiB');
  if (e.type === 'encoding.unsupported' || e.type === 'charset.unsupported' || status === 415) {
    return new ValidationError('The body encoding or charset is not supported; send UTF-8 JSON.', undefined, 'unsupported_media_type');
  }
  if (typeof e.type === 'string' || (status !== undefined && status >= 400 && status < 500)) {
    return new ValidationError('The request body is not valid JSON.', undefined, 'malformed_json');
  }
  return undefined;
}

/** Turns anything thrown into the AppError to answer with, or undefined for a bug (bare 500). */
export function toAppError(err: unknown): AppError | undefined {
  if (err instanceof AppError) return err;
  // A value sealed under a key this process was not given: a data-key rotation rolled out out of order.
  if (err instanceof UnknownDataKeyError) return new DependencyUnavailableError(`data encryption key ${err.keyId}`);
  return mapDatabaseError(err) ?? bodyParserError(err);
}

/**
 * What a problem answer may hold, whatever produced it: at most MAX_PROBLEMS field problems, each
 * text cut short. A request listing thousands of mistakes (or quoting a long key back) gets an
 * answer of a few KiB, never one that grows with the request.
 */
export const MAX_PROBLEMS = 10;
const MAX_DETAIL = 1024;
const MAX_PATH = 256;
const MAX_MESSAGE = 512;
const cut = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max)}…` : text);

export function problemFor(err: AppError, requestId: string): ProblemBody {
  const body: ProblemBody = {
    type: `urn:custody:problem:${err.code}`,
    title: err.title,
    status: err.status,
    detail: cut(err.detail, MAX_DETAIL),
    code: err.code,
    requestId,
  };
  if (err.errors && err.errors.length > 0) {
    body.errors = err.errors
      .slice(0, MAX_PROBLEMS)
      .map((e) => ({ ...(e.in ? { in: e.in } : {}), path: cut(e.path, MAX_PATH), message: cut(e.message, MAX_MESSAGE) }));
  }
  return body;
}

export const INTERNAL_ERROR = new AppError(500, 'internal_error', 'Internal Server Error', 'An unexpected error occurred.');

export function sendProblem(ctx: Context, err: AppError, requestId: string): void {
  ctx.status = err.status;
  for (const [name, value] of Object.entries(err.headers)) ctx.set(name, value);
  ctx.type = 'application/problem+json';
  ctx.body = JSON.stringify(problemFor(err, requestId));
}
