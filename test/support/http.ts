import type { Problem } from '../../src/programs/client/index.js';
import { observeResponse } from './observed.js';
import type { SuccessBody } from './operations.js';

export type { Problem };

export interface Reply<T = unknown> {
  status: number;
  headers: Headers;
  /** Parsed JSON when the answer is JSON, else undefined; typed as the operation's success. */
  body: T;
  /** The same JSON read as a problem (docs/interface.md section 2); only a 4xx or 5xx answer has one. */
  readonly problem: Problem;
  text: string;
}

export interface RequestOptions {
  /** Bearer token; `null` sends no Authorization header. Defaults to the client's token. */
  token?: string | null;
  json?: unknown;
  /** Sent as is, with `contentType` (default application/json). */
  raw?: string | Buffer;
  contentType?: string | null;
  headers?: Record<string, string>;
}

function replyOf<T>(status: number, headers: Headers, parsed: unknown, text: string): Reply<T> {
  return {
    status,
    headers,
    body: parsed as T,
    text,
    get problem(): Problem {
      if (status < 400 || parsed === undefined) throw new Error(`a ${status} answer holds no problem: ${text.slice(0, 200)}`);
      return parsed as Problem;
    },
  };
}

/**
 * A small HTTP client for tests: real requests over the network, JSON in and out. Replies are
 * typed by the path (support/operations.ts), so a test reads them as the typed client would.
 */
export class Client {
  constructor(
    readonly baseUrl: string,
    readonly token: string | null,
  ) {}

  withToken(token: string | null): Client {
    return new Client(this.baseUrl, token);
  }

  async request<M extends string, P extends string>(method: M, path: P, options: RequestOptions = {}): Promise<Reply<SuccessBody<M, P>>> {
    const headers: Record<string, string> = { ...options.headers };
    const token = options.token === undefined ? this.token : options.token;
    if (token !== null) headers['authorization'] = `Bearer ${token}`;
    let body: string | Buffer | undefined;
    if (options.json !== undefined) body = JSON.stringify(options.json);
    if (options.raw !== undefined) body = options.raw;
    if (body !== undefined && options.contentType !== null) headers['content-type'] = options.contentType ?? 'application/json';
    const res = await fetch(`${this.baseUrl}${path}`, { method, headers, body });
    const text = await res.text();
    const type = res.headers.get('content-type') ?? '';
    const parsed: unknown = /json/.test(type) && text !== '' ? JSON.parse(text) : undefined;
    observeResponse(method, `${this.baseUrl}${path}`, res, text);
    return replyOf(res.status, res.headers, parsed, text);
  }

  get<P extends string>(path: P, options?: RequestOptions) {
    return this.request('GET', path, options);
  }
  post<P extends string>(path: P, json?: unknown, options?: RequestOptions) {
    return this.request('POST', path, { ...options, json });
  }
  put<P extends string>(path: P, json?: unknown, options?: RequestOptions) {
    return this.request('PUT', path, { ...options, json });
  }
  delete<P extends string>(path: P, options?: RequestOptions) {
    return this.request('DELETE', path, options);
  }
}

/** A value the contract says a reply holds (an optional field, an array's element): its absence fails the test here. */
export function required<T>(value: T | null | undefined, what = 'a value the reply should hold'): T {
  if (value === undefined || value === null) throw new Error(`missing: ${what}`);
  return value;
}
