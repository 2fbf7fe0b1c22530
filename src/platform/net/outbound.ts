import { request as httpRequest, type Agent as HttpAgent, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest, type Agent as HttpsAgent } from 'node:https';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import { EgressBlockedError, egressLookup, literalHostAllowed, type EgressPolicy } from './egress.js';

/** How an outbound request failed, in the classes docs/interface.md section 8 lists (plus two of our own). */
export type OutboundFailure = 'timeout' | 'dns' | 'tls' | 'connection' | 'ssrf_blocked' | 'redirect' | 'too_large';

export class OutboundError extends Error {
  constructor(
    readonly kind: OutboundFailure,
    message: string,
  ) {
    super(message);
    this.name = 'OutboundError';
  }
}

export interface OutboundOptions {
  policy: EgressPolicy;
  connectTimeoutMs: number;
  timeoutMs: number;
  /** Bodies above this are cut (`truncated`) or refused (`refuseLarger`). */
  maxBodyBytes: number;
  refuseLarger?: boolean;
  /** True (default): a 3xx with Location is an error. False: it is just a (non-2xx) answer. */
  rejectRedirects?: boolean;
  /** Extra trusted CA certificates (PEM), added to the system's. */
  extraCa?: string | undefined;
  userAgent: string;
  /**
   * Keep-alive agents to reuse connections (webhook deliveries); default none: a connection per
   * request. The egress rule is checked whenever a new connection is made.
   */
  agents?: { http: HttpAgent; https: HttpsAgent } | undefined;
}

export interface OutboundResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  truncated: boolean;
}

const contexts = new Map<string, SecureContext>();

/**
 * The system's CAs and `extraCa`, parsed once per process. Given as `ca` on each request, Node
 * builds a context for every new connection and parses some 140 root certificates each time:
 * tens of milliseconds of the event loop per connection (bench:fairness profiled it).
 */
export function trustingAlso(extraCa: string): SecureContext {
  let context = contexts.get(extraCa);
  if (!context) contexts.set(extraCa, (context = createSecureContext({ ca: [...rootCertificates, extraCa] })));
  return context;
}

const TLS_CODES = /^(ERR_TLS_|UNABLE_TO_|SELF_SIGNED|DEPTH_ZERO|CERT_|HOSTNAME_MISMATCH|ERR_SSL)/;

function classify(err: unknown): OutboundError {
  if (err instanceof OutboundError) return err;
  if (err instanceof EgressBlockedError) return new OutboundError('ssrf_blocked', err.message);
  const raw = (err as { code?: unknown }).code;
  const code = typeof raw === 'string' ? raw : '';
  if (code === 'SSRF_BLOCKED') return new OutboundError('ssrf_blocked', (err as Error).message);
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NONAME') return new OutboundError('dns', `DNS lookup failed (${code})`);
  if (TLS_CODES.test(code) || /certificate|TLS|SSL/i.test((err as Error).message ?? '')) return new OutboundError('tls', `TLS failed (${code || 'handshake'})`);
  return new OutboundError('connection', `connection failed (${code || 'closed'})`);
}

/**
 * One outbound HTTP(S) request: egress policy on every resolved address, connect and total
 * timeouts, no redirects followed, the response body read up to a bound.
 */
export async function outboundRequest(
  url: URL,
  init: { method: 'GET' | 'POST'; headers?: Record<string, string>; body?: string },
  options: OutboundOptions,
): Promise<OutboundResponse> {
  try {
    return await sendOnce(url, init, options);
  } catch (err) {
    // A kept-alive socket the peer closed just as we wrote to it: not the endpoint's failure.
    // Sent again once on a fresh connection.
    if (err instanceof StaleSocketError) return sendOnce(url, init, { ...options, agents: undefined });
    throw err;
  }
}

class StaleSocketError extends OutboundError {
  constructor() {
    super('connection', 'a reused connection was closed by the peer');
  }
}

function sendOnce(
  url: URL,
  init: { method: 'GET' | 'POST'; headers?: Record<string, string>; body?: string },
  options: OutboundOptions,
): Promise<OutboundResponse> {
  if (!literalHostAllowed(options.policy, url.hostname)) {
    return Promise.reject(new OutboundError('ssrf_blocked', `outbound address ${url.hostname} is not allowed`));
  }
  const https = url.protocol === 'https:';
  const send = https ? httpsRequest : httpRequest;
  return new Promise<OutboundResponse>((resolve, reject) => {
    let settled = false;
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(total);
      clearTimeout(connect);
      req.destroy();
      reject(classify(err));
    };
    const req = send(url, {
      method: init.method,
      headers: { 'user-agent': options.userAgent, ...init.headers },
      lookup: egressLookup(options.policy),
      agent: options.agents ? (https ? options.agents.https : options.agents.http) : false,
      ...(https && options.extraCa ? { secureContext: trustingAlso(options.extraCa) } : {}),
    });
    const total = setTimeout(() => fail(new OutboundError('timeout', `no complete answer within ${options.timeoutMs} ms`)), options.timeoutMs);
    const connect = setTimeout(() => fail(new OutboundError('timeout', `no connection within ${options.connectTimeoutMs} ms`)), options.connectTimeoutMs);
    req.on('socket', (socket) => {
      // A kept-alive socket is connected already (and never emits connect again).
      if (!socket.connecting) clearTimeout(connect);
      else socket.once(https ? 'secureConnect' : 'connect', () => clearTimeout(connect));
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      const stale = req.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE') && !responded;
      fail(stale ? new StaleSocketError() : err);
    });
    let responded = false;
    req.on('response', (res) => {
      responded = true;
      clearTimeout(connect);
      const status = res.statusCode ?? 0;
      if (options.rejectRedirects !== false && status >= 300 && status < 400 && res.headers.location !== undefined) {
        res.resume();
        return fail(new OutboundError('redirect', `answered ${status} with a redirect, which is not followed`));
      }
      const chunks: Buffer[] = [];
      let size = 0;
      let truncated = false;
      res.on('data', (chunk: Buffer) => {
        if (truncated) return;
        if (size + chunk.length > options.maxBodyBytes) {
          if (options.refuseLarger) return fail(new OutboundError('too_large', `body over ${options.maxBodyBytes} bytes`));
          chunks.push(chunk.subarray(0, options.maxBodyBytes - size));
          size = options.maxBodyBytes;
          truncated = true;
          // Enough read: stop the transfer rather than wait for the rest.
          settled = true;
          clearTimeout(total);
          req.destroy();
          resolve({ status, headers: res.headers, body: Buffer.concat(chunks), truncated });
          return;
        }
        size += chunk.length;
        chunks.push(chunk);
      });
      res.on('end', () => {
        if (settled) return;
        settled = true;
        clearTimeout(total);
        resolve({ status, headers: res.headers, body: Buffer.concat(chunks), truncated });
      });
      res.on('error', fail);
    });
    req.end(init.body);
  });
}
