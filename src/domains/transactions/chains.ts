import type { ChainConfig } from '../../platform/eth/chains.js';
import { ChainRpc } from '../../platform/eth/rpc.js';
import type { Logger } from '../../platform/logging/logger.js';
import type { Clock } from '../../platform/runtime/clock.js';
import { FeeOracle } from './fees.js';
import { TransferGas } from './gas.js';

/** A configured chain as a process uses it: its settings, its RPC URLs, its fee market. */
export interface Chain {
  readonly config: ChainConfig;
  readonly rpc: ChainRpc;
  readonly fees: FeeOracle;
  /** Whether a plain transfer costs exactly its intrinsic gas here (learned from the node's estimates). */
  readonly transfers: TransferGas;
}

/** The chains of the process's configuration, each with one RPC client (its URL states and fee answers are shared by every send). */
export class Chains {
  readonly #chains = new Map<number, Chain>();

  constructor(configs: readonly ChainConfig[], log: Logger, now: Clock) {
    for (const config of configs) {
      const rpc = new ChainRpc(config, { log, now, timeoutMs: config.rpcTimeoutMs, cooldownMs: config.rpcCooldownMs });
      // Asked at most a few times per block: a busy second's sends share one answer.
      this.#chains.set(config.chainId, {
        config,
        rpc,
        fees: new FeeOracle(rpc, now, Math.max(50, Math.floor(config.blockTimeMs / 4))),
        transfers: new TransferGas(now),
      });
    }
  }

  get(chainId: number): Chain | undefined {
    return this.#chains.get(chainId);
  }

  get ids(): number[] {
    return [...this.#chains.keys()];
  }

  /**
   * Checks every chain's URLs at start (docs/transactions.md): a URL answering another chain id is
   * never used, and is reported; an unreachable one is tried again when a send needs it.
   */
  async verify(log: Logger): Promise<void> {
    for (const chain of this.#chains.values()) {
      const { ok, wrong, unreachable } = await chain.rpc.verify();
      if (wrong.length > 0) log.error({ chainId: chain.config.chainId, rpcs: wrong }, 'RPC URLs of the chain answer another chain id: they are not used');
      if (unreachable.length > 0) log.warn({ chainId: chain.config.chainId, rpcs: unreachable }, 'RPC URLs of the chain did not answer at start');
      if (ok === 0) log.warn({ chainId: chain.config.chainId }, 'no RPC URL of the chain answered at start: sends on it wait');
    }
  }
}
