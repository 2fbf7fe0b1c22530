import type { Logger } from '../logging/logger.js';
import type { ChainConfig } from './chains.js';

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
  url: string;
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
  #id = 0;

  constructor(
    readonly chain: ChainConfig,
    private readonly options: RpcOptions = {},
  ) {
    this.#endpoints = chain.rpcUrls.map((url, place) => ({ url, place, checked: 'unknown', downUntil: 0 }));
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

  /** A call, on the first URL that answers; RpcError when the node refuses it, RpcUnavailable when none answers. */
  async call<T = unknown>(method: string, params: unknown[]): Promise<T> {
    const now = this.#now();
    const usable = this.#endpoints.filter((e) => e.checked !== 'wrong');
    // The ones not set aside first, in their order; then the set-aside ones, rather than nothing.
    const order = [...usable.filter((e) => e.downUntil <= now), ...usable.filter((e) => e.downUntil > now)];
    for (const e of order) {
      if ((await this.#check(e)) !== 'ok') continue;
      try {
        return (await this.#post(e, method, params)) as T;
      } catch (err) {
        if (err instanceof RpcError) throw err;
        e.downUntil = this.#now() + this.#cooldownMs;
        this.options.log?.warn({ chainId: this.chain.chainId, rpc: e.place, method, reason: (err as Error).message }, 'RPC URL failed; trying the next');
      }
    }
    throw new RpcUnavailable(this.chain.chainId);
  }

  async #post(e: Endpoint, method: string, params: unknown[]): Promise<unknown> {
    const id = ++this.#id;
    const res = await fetch(e.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
      signal: AbortSignal.timeout(this.#timeoutMs),
      redirect: 'error',
    });
    const text = await res.text();
    if (res.status === 429 || res.status >= 500) throw new Error(`HTTP ${res.status}`);
    let body: { result?: unknown; error?: { code?: unknown; message?: unknown; data?: unknown } };
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      throw new Error(`HTTP ${res.status}: not JSON`);
    }
    if (typeof body !== 'object' || body === null) throw new Error('not a JSON-RPC answer');
    if (body.error) {
      const code = typeof body.error.code === 'number' ? body.error.code : 0;
      // Providers answer their own limits as JSON-RPC errors too: those are about the provider.
      if (code === -32005 || code === 429) throw new Error(`rate limited (${code})`);
      throw new RpcError(code, typeof body.error.message === 'string' ? body.error.message.slice(0, 300) : 'error', body.error.data);
    }
    if (!('result' in body)) throw new Error('not a JSON-RPC answer');
    return body.result;
  }
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
