import http from 'node:http';
import https from 'node:https';
import { urlToHttpOptions } from 'node:url';
import type { Logger } from '../logging/logger.js';
import type { ChainConfig } from './chains.js';

/** A node's hex quantity (`0x…`, at most 256 bits); undefined for any other answer. */
export const quantityOf = (v: unknown): bigint | undefined => (typeof v === 'string' && /^0x[0-9a-fA-F]{1,64}$/.test(v) ? BigInt(v) : undefined);
/** A quantity or bytes as JSON-RPC takes them. */
export const hexQuantity = (v: bigint): string => `0x${v.toString(16)}`;
export const hexBytes = (b: Buffer): string => `0x${b.toString('hex')}`;

/** The node answered the call with a JSON-RPC error: a fact about the request, never about the provider. */
export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = 'RpcError';
  }
}

/** No URL of the chain answered (transport faults, 429, 5xx, timeouts, a wrong chain): retry later. */
export class RpcUnavailable extends Error {
  constructor(readonly chainId: number) {
    super(`no RPC URL of chain ${chainId} answered`);
    this.name = 'RpcUnavailable';
  }
}

interface Endpoint {
  /** Parsed once; its user-info (credentials) goes as Basic authentication, never into a log. */
  target: http.RequestOptions;
  /** Its place in the list: what logs name (the URL may carry credentials). */
  place: number;
  /** Whether its `eth_chainId` was seen to match; a URL of another chain is never used. */
  checked: 'unknown' | 'ok' | 'wrong';
  /** Skipped until then after a fault, unless every URL is. */
  downUntil: number;
}

export interface RpcOptions {
  timeoutMs?: number;
  /** How long a URL is passed over after a fault. */
  cooldownMs?: number;
  now?: () => number;
  log?: Logger;
}

/**
 * One chain's RPC URLs, tried in order (docs/transactions.md): a transport fault, a 429 or 5xx,
 * a timeout or an answer that is not JSON-RPC moves on to the next URL and sets the faulty one
 * aside for a while; a JSON-RPC error is the node's answer and is returned as such (RpcError).
 * Each URL's `eth_chainId` is checked before its first use.
 */
export class ChainRpc {
  readonly #endpoints: Endpoint[];
  readonly #timeoutMs: number;
  readonly #cooldownMs: number;
  readonly #now: () => number;
  /** Connections kept open between calls, per scheme (a node's URL is asked many times a second). */
  readonly #agents = { http: new http.Agent(KEEP_ALIVE), https: new https.Agent(KEEP_ALIVE) };
  #id = 0;

  constructor(
    readonly chain: ChainConfig,
    private readonly options: RpcOptions = {},
  ) {
    this.#endpoints = chain.rpcUrls.map((url, place) => ({ target: urlToHttpOptions(new URL(url)), place, checked: 'unknown', downUntil: 0 }));
    this.#timeoutMs = options.timeoutMs ?? 5_000;
    this.#cooldownMs = options.cooldownMs ?? 5_000;
    this.#now = options.now ?? Date.now;
  }

  /** Checks every URL's chain id: the number that answered with the configured one. A URL of another chain is refused for good. */
  async verify(): Promise<{ ok: number; wrong: number[]; unreachable: number[] }> {
    const result = { ok: 0, wrong: [] as number[], unreachable: [] as number[] };
    for (const e of this.#endpoints) {
      const outcome = await this.#check(e);
      if (outcome === 'ok') result.ok++;
      else if (outcome === 'wrong') result.wrong.push(e.place);
      else result.unreachable.push(e.place);
    }
    return result;
  }

  async #check(e: Endpoint): Promise<'ok' | 'wrong' | 'unreachable'> {
    if (e.checked !== 'unknown') return e.checked;
    try {
      const id = await this.#post(e, 'eth_chainId', []);
      e.checked = typeof id === 'string' && BigInt(id) === BigInt(this.chain.chainId) ? 'ok' : 'wrong';
      if (e.checked === 'wrong')
        this.options.log?.error({ chainId: this.chain.chainId, rpc: e.place }, 'an RPC URL of the chain answers another chain id: never used');
      return e.checked;
    } catch {
      e.downUntil = this.#now() + this.#cooldownMs;
      return 'unreachable';
    }
  }

  /** The URLs to try: those not set aside first, in their order; then the set-aside ones, rather than nothing. */
  #order(): Endpoint[] {
    const now = this.#now();
    const usable = this.#endpoints.filter((e) => e.checked !== 'wrong');
    return [...usable.filter((e) => e.downUntil <= now), ...usable.filter((e) => e.downUntil > now)];
  }

  /** A call, on the first URL that answers; RpcError when the node refuses it, RpcUnavailable when none answers. */
  async call<T = unknown>(method: string, params: unknown[]): Promise<T> {
    for (const e of this.#order()) {
      if ((await this.#check(e)) !== 'ok') continue;
      try {
        return (await this.#post(e, method, params)) as T;
      } catch (err) {
        if (err instanceof RpcError) throw err;
        e.downUntil = this.#now() + this.#cooldownMs;
        this.options.log?.warn({ chainId: this.chain.chainId, rpc: e.place, method, reason: reasonOf(err) }, 'RPC URL failed; trying the next');
      }
    }
    throw new RpcUnavailable(this.chain.chainId);
  }

  /**
   * Calls in one JSON-RPC batch, on the first URL that answers: each call's result or its
   * RpcError, in the calls' order; RpcUnavailable when no URL answers. A node that refuses batches
   * (an answer that is not an array) is asked one call at a time.
   */
  async callMany<T = unknown>(calls: ReadonlyArray<{ method: string; params: unknown[] }>): Promise<Array<T | RpcError>> {
    if (calls.length === 0) return [];
    const out: Array<T | RpcError> = [];
    for (let i = 0; i < calls.length; i += BATCH_MAX) out.push(...(await this.#batch<T>(calls.slice(i, i + BATCH_MAX))));
    return out;
  }

  async #batch<T>(calls: ReadonlyArray<{ method: string; params: unknown[] }>): Promise<Array<T | RpcError>> {
    for (const e of this.#order()) {
      if ((await this.#check(e)) !== 'ok') continue;
      try {
        const answers = await this.#postMany(e, calls);
        if (answers) return answers as Array<T | RpcError>;
        // No batches here: one call at a time on this URL.
        const one: Array<T | RpcError> = [];
        for (const c of calls) {
          try {
            one.push((await this.#post(e, c.method, c.params)) as T);
          } catch (err) {
            if (!(err instanceof RpcError)) throw err;
            one.push(err);
          }
        }
        return one;
      } catch (err) {
        e.downUntil = this.#now() + this.#cooldownMs;
        this.options.log?.warn({ chainId: this.chain.chainId, rpc: e.place, method: 'batch', reason: reasonOf(err) }, 'RPC URL failed; trying the next');
      }
    }
    throw new RpcUnavailable(this.chain.chainId);
  }

  /** A batch's answers in the calls' order, or undefined when the node answered something else than an array (no batches). */
  async #postMany(e: Endpoint, calls: ReadonlyArray<{ method: string; params: unknown[] }>): Promise<Array<unknown> | undefined> {
    const first = this.#id + 1;
    this.#id += calls.length;
    const text = await this.#send(e, JSON.stringify(calls.map((c, i) => ({ jsonrpc: '2.0', id: first + i, method: c.method, params: c.params }))));
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new TransportFault('not JSON');
    }
    if (!Array.isArray(body)) {
      const error = (body as { error?: { code?: unknown } } | null)?.error;
      if (error && (error.code === -32005 || error.code === 429)) throw new TransportFault(`rate limited (${String(error.code)})`);
      return undefined;
    }
    const byId = new Map<number, unknown>();
    for (const item of body as Array<{ id?: unknown }>) if (typeof item?.id === 'number') byId.set(item.id, item);
    return calls.map((_, i) => {
      const item = byId.get(first + i);
      if (item === undefined) throw new TransportFault('a batch answer lacks a call');
      return resultOf(item);
    });
  }

  /**
   * The body of a POST to the URL over a kept-alive connection; a transport fault, a timeout, a
   * 429 or 5xx, a redirect (not followed) or an answer over ANSWER_MAX_BYTES throws (the URL's fault).
   */
  #send(e: Endpoint, body: string): Promise<string> {
    const secure = e.target.protocol === 'https:';
    return new Promise<string>((resolve, reject) => {
      const req = (secure ? https : http).request(
        {
          ...e.target,
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
          agent: secure ? this.#agents.https : this.#agents.http,
          signal: AbortSignal.timeout(this.#timeoutMs),
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size > ANSWER_MAX_BYTES) req.destroy(new TransportFault('answer too large'));
            else chunks.push(c);
          });
          res.on('error', reject);
          res.on('close', () => {
            if (!res.complete) return reject(new TransportFault('answer cut short'));
            const status = res.statusCode ?? 0;
            // A refusal of the URL itself (a key revoked, wrong credentials, an unknown path) is not the node's answer to the call, whatever its body says.
            if (status === 429 || status >= 500 || URL_REFUSALS.has(status)) return reject(new TransportFault(`HTTP ${status}`));
            if (status >= 300 && status < 400) return reject(new TransportFault(`HTTP ${status} (redirects are not followed)`));
            resolve(Buffer.concat(chunks).toString('utf8'));
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  async #post(e: Endpoint, method: string, params: unknown[]): Promise<unknown> {
    const id = ++this.#id;
    const text = await this.#send(e, JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new TransportFault('not JSON');
    }
    const result = resultOf(body);
    if (result instanceof RpcError) throw result;
    return result;
  }
}

/** Calls per JSON-RPC batch: providers commonly accept 100 or more. */
const BATCH_MAX = 100;
/**
 * Connections kept open between calls, and closed after 4 s unused (a load balancer or NAT may
 * drop an idle one silently, and a call on it would fail); as many at once as calls need, since a
 * call queued for a connection would spend its time limit waiting.
 */
const KEEP_ALIVE: http.AgentOptions = { keepAlive: true, timeout: 4_000 };
/** The most of one answer read: a batch of 100 receipts is a small part of it; more is a fault of the URL. */
const ANSWER_MAX_BYTES = 32 * 1024 * 1024;

/** Statuses that refuse the URL, not the call: unauthorized, payment required, forbidden, not found, proxy authentication required. */
const URL_REFUSALS: ReadonlySet<number> = new Set([401, 402, 403, 404, 407]);

/** A fault of the URL this module names itself (its message holds nothing of the URL). */
class TransportFault extends Error {}

/**
 * Why a URL failed, for a log line: a fault this module named, a transport error's code, or
 * `timeout`; never an error's own message, which may carry the URL and its credentials.
 */
function reasonOf(err: unknown): string {
  if (err instanceof TransportFault) return err.message;
  if (err instanceof Error && err.name === 'AbortError') return 'timeout';
  if (err instanceof Error && err.name === 'TimeoutError') return 'timeout';
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{2,40}$/.test(code) ? code : 'transport error';
}

/**
 * One JSON-RPC answer: its result, or the node's RpcError; throws when it is no answer or a
 * provider's own limit (those are about the provider, not the request).
 */
function resultOf(answer: unknown): unknown {
  if (typeof answer !== 'object' || answer === null) throw new TransportFault('not a JSON-RPC answer');
  const body = answer as { result?: unknown; error?: { code?: unknown; message?: unknown; data?: unknown } };
  if (body.error) {
    const code = typeof body.error.code === 'number' ? body.error.code : 0;
    if (code === -32005 || code === 429) throw new TransportFault(`rate limited (${code})`);
    return new RpcError(code, typeof body.error.message === 'string' ? body.error.message.slice(0, 300) : 'error', body.error.data);
  }
  if (!('result' in body)) throw new TransportFault('not a JSON-RPC answer');
  return body.result;
}

/** What a node's refusal of a raw transaction says about it (the texts geth, anvil and others use). */
export type BroadcastFact = 'known' | 'nonce_too_low' | 'underpriced' | 'insufficient_funds' | 'invalid';

export function broadcastFact(err: RpcError): BroadcastFact {
  const m = err.message.toLowerCase();
  if (m.includes('already known') || m.includes('known transaction') || m.includes('already imported') || m.includes('already exists')) return 'known';
  if (m.includes('nonce too low') || m.includes('nonce has already been used') || m.includes('invalid nonce') || m.includes('old nonce'))
    return 'nonce_too_low';
  // Under the block's base fee is a fact of the market now, not of the transaction: it waits and is re-priced.
  if (m.includes('underpriced') || m.includes('fee too low') || m.includes('replacement') || m.includes('base fee') || m.includes('basefee'))
    return 'underpriced';
  if (m.includes('insufficient funds') || m.includes('insufficient balance') || m.includes('lack of funds')) return 'insufficient_funds';
  return 'invalid';
}
