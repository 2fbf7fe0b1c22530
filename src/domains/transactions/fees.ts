import type { ChainConfig } from '../../platform/eth/chains.js';
import type { ChainRpc } from '../../platform/eth/rpc.js';

/** EIP-1559 fee fields as signed. */
export interface Fees {
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

/** What the market asks now: the next block's base fee and the priority fee paid lately. */
export interface Market {
  baseFee: bigint;
  priorityFee: bigint;
}

const hexOf = (v: unknown): bigint => (typeof v === 'string' && /^0x[0-9a-fA-F]+$/.test(v) ? BigInt(v) : 0n);

/**
 * The fee market of one chain, from `eth_feeHistory` (the next block's base fee, the median
 * priority fee of the last blocks), asked at most once per `maxAgeMs` (a fraction of the block
 * time): every send of a busy second shares one answer.
 */
export class FeeOracle {
  #last: { at: number; market: Market } | undefined;
  #pending: Promise<Market> | undefined;

  constructor(
    private readonly rpc: ChainRpc,
    private readonly now: () => number,
    private readonly maxAgeMs: number,
  ) {}

  async market(): Promise<Market> {
    const last = this.#last;
    if (last && this.now() - last.at < this.maxAgeMs) return last.market;
    this.#pending ??= this.#ask().finally(() => (this.#pending = undefined));
    return this.#pending;
  }

  /** Forgets the last answer: the next send asks again (after a block was seen, say). */
  forget(): void {
    this.#last = undefined;
  }

  async #ask(): Promise<Market> {
    const history = await this.rpc.call<{ baseFeePerGas?: unknown[]; reward?: unknown[][] }>('eth_feeHistory', ['0x5', 'latest', [50]]);
    const bases = history.baseFeePerGas ?? [];
    const baseFee = hexOf(bases[bases.length - 1]);
    const tips = (history.reward ?? []).map((r) => hexOf(r[0])).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const market = { baseFee, priorityFee: tips[Math.floor(tips.length / 2)] ?? 0n };
    this.#last = { at: this.now(), market };
    return market;
  }
}

/**
 * The fees of a new send, within the chain's caps (docs/transactions.md): the priority fee paid
 * lately (at least the chain's minimum), and a fee cap of twice the base fee plus it, cut at the
 * chain's cap. Undefined when the base fee and the priority fee alone exceed the cap: nothing is
 * signed, the send waits.
 */
export function feesFor(chain: ChainConfig, market: Market): Fees | undefined {
  let tip = market.priorityFee < chain.minPriorityFeePerGas ? chain.minPriorityFeePerGas : market.priorityFee;
  if (tip > chain.maxPriorityFeePerGas) tip = chain.maxPriorityFeePerGas;
  if (market.baseFee + tip > chain.maxFeePerGas) return undefined;
  const wanted = 2n * market.baseFee + tip;
  return { maxFeePerGas: wanted > chain.maxFeePerGas ? chain.maxFeePerGas : wanted, maxPriorityFeePerGas: tip };
}

const bump = (v: bigint, percent: number): bigint => (v * BigInt(100 + percent) + 99n) / 100n;
const max = (a: bigint, b: bigint): bigint => (a > b ? a : b);

/**
 * The fees of a replacement of `current`: both fields at least the chain's bump above the
 * current ones (the mempools refuse less) and at least what a new send would offer now. Undefined
 * when that is above a cap, or the market is: the transaction waits where it is.
 */
export function replacementFees(chain: ChainConfig, current: Fees, market: Market): Fees | undefined {
  const fresh = feesFor(chain, market);
  // A market above the cap would not mine a replacement either: it waits for fees to fall.
  if (fresh === undefined) return undefined;
  const tip = max(bump(current.maxPriorityFeePerGas, chain.replacementBumpPercent), fresh.maxPriorityFeePerGas);
  const cap = max(bump(current.maxFeePerGas, chain.replacementBumpPercent), fresh.maxFeePerGas);
  if (tip > chain.maxPriorityFeePerGas || cap > chain.maxFeePerGas) return undefined;
  return { maxFeePerGas: max(cap, tip), maxPriorityFeePerGas: tip };
}
