import type { ServiceJwk } from '../../../contract/index.js';
import type { SignerClient } from '../../platform/signer/client.js';

/**
 * The service key's public keys as the signer last answered them, kept `ttlMs`: the JWKS and the
 * checkpoint verifier read them often, and a rotation in Vault shows here within `ttlMs` without a
 * restart. Concurrent misses share one call.
 */
export class ServiceKeys {
  #cached: { at: number; keys: ServiceJwk[] } | undefined;
  #pending: Promise<ServiceJwk[]> | undefined;

  constructor(
    private readonly signer: Pick<SignerClient, 'serviceKeys'>,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  keys(): Promise<ServiceJwk[]> {
    const c = this.#cached;
    if (c && this.now() - c.at < this.ttlMs) return Promise.resolve(c.keys);
    this.#pending ??= this.signer
      .serviceKeys()
      .then((keys) => {
        this.#cached = { at: this.now(), keys };
        return keys;
      })
      .finally(() => (this.#pending = undefined));
    return this.#pending;
  }
}
