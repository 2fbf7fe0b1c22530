import { observeResponse } from './observed.js';

/** A reply body as JSON, read field by field: each test says which shape it expects. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export interface Reply<T = Record<string, unknown>> {
  status: number;
  headers: Headers;
  /** Parsed JSON when the answer is JSON, else undefined. */
  body: T;
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

/** A small HTTP client for tests: real requests over the network, JSON in and out. */
export class Client {
  constructor(
    readonly baseUrl: string,
    readonly token: string | null,
  ) {}

  withToken(token: string | null): Client {
    return new Client(this.baseUrl, token);
  }

  // The reply is whatever JSON the service sent; tests say which shape they expect.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async request<T = any>(method: string, path: string, options: RequestOptions = {}): Promise<Reply<T>> {
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
    return { status: res.status, headers: res.headers, body: parsed as T, text };
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  get<T = any>(path: string, options?: RequestOptions) {
    return this.request<T>('GET', path, options);
  }
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  post<T = any>(path: string, json?: unknown, options?: RequestOptions) {
    return this.request<T>('POST', path, { ...options, json });
  }
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  put<T = any>(path: string, json?: unknown, options?: RequestOptions) {
    return this.request<T>('PUT', path, { ...options, json });
  }
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  delete<T = any>(path: string, options?: RequestOptions) {
    return this.request<T>('DELETE', path, options);
  }
}
