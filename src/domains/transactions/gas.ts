import type { Clock } from '../../platform/runtime/clock.js';
import { hexBytes, hexQuantity, quantityOf, RpcError, RpcUnavailable, type ChainRpc } from '../../platform/eth/rpc.js';
import type { TransactionRow } from './repository.js';

/** The intrinsic gas of a transaction: all a value transfer to an account without code costs on an Ethereum-like chain. */
export const TRANSFER_GAS = 21_000n;
/** How long a chain's estimate of a plain transfer at TRANSFER_GAS is trusted before one is asked again. */
const TRUSTED_MS = 60_000;
/**
 * Addresses up to here are kept for precompiles (Ethereum's 0x01–0x11, P-256 at 0x100 on L2s):
 * one runs, and costs gas, though it holds no code. A transfer to one is estimated.
 */
const SYSTEM_ADDRESSES = 0x3ffn;

/** Why a send has no gas: the node's estimate failed, or its value is more than the wallet holds. */
export interface GasRefusal {
  message: string;
}

/**
 * Whether a chain charges a plain transfer (no data, to an account without code) exactly its
 * intrinsic gas, learned from the node's own estimates of such transfers and asked again every
 * TRUSTED_MS. Ethereum and most L2s do; a chain that folds its L1 data cost into gas (Arbitrum) or
 * prices transfers otherwise (zkSync) answers more, and its sends are estimated every time.
 */
export class TransferGas {
  #trustedUntil = 0;

  constructor(private readonly now: Clock) {}

  get trusted(): boolean {
    return this.now() < this.#trustedUntil;
  }

  learn(estimate: bigint): void {
    this.#trustedUntil = estimate === TRANSFER_GAS ? this.now() + TRUSTED_MS : 0;
  }
}

type Needing = Pick<TransactionRow, 'id' | 'from_address' | 'to_address' | 'value' | 'data'>;

/** A value transfer with no data to an address outside the system range: its gas may be the intrinsic gas, if the recipient has no code. */
const plainTransfer = (r: Needing): boolean => r.data.length === 0 && r.to_address !== null && BigInt(r.to_address) > SYSTEM_ADDRESSES;

const estimateCall = (r: Needing) => ({
  method: 'eth_estimateGas',
  params: [{ from: r.from_address, ...(r.to_address ? { to: r.to_address } : {}), value: hexQuantity(BigInt(r.value)), data: hexBytes(r.data) }],
});

/**
 * The gas of sends of one wallet that did not give theirs (docs/transactions.md, "Gas"): a plain
 * transfer to an account without code on a chain that charges it its intrinsic gas takes exactly
 * that, with no estimate (the recipients' code and the wallet's balance are asked instead: the
 * node executes nothing); the others the node's estimate plus the chain's margin. One JSON-RPC
 * batch, and a second for transfers whose recipient turned out to have code. Throws
 * RpcUnavailable when no URL answers, or one answers an estimate that is no quantity.
 */
export async function gasOf(rpc: ChainRpc, transfers: TransferGas, marginPercent: number, rows: readonly Needing[]): Promise<Map<number, bigint | GasRefusal>> {
  const out = new Map<number, bigint | GasRefusal>();
  const first = rows[0];
  if (!first) return out;
  const withMargin = (estimate: bigint) => (estimate * BigInt(100 + marginPercent)) / 100n;
  // The node's refusal fails the send; an answer that is no quantity is a fault of the URL: the queue waits and asks again.
  const gasFrom = (e: unknown): bigint | GasRefusal => {
    if (e instanceof RpcError) return { message: `The node's gas estimate failed: ${e.message}` };
    const gas = quantityOf(e);
    if (gas === undefined) throw new RpcUnavailable(rpc.chain.chainId);
    return gas;
  };
  const plain = rows.filter(plainTransfer);
  const recipients = [...new Set(plain.map((r) => r.to_address!))];
  const trusted = transfers.trusted && plain.length > 0;
  // While the chain is not trusted, transfers are estimated too, and their recipients' code asked beside (to learn from them).
  const estimated = trusted ? rows.filter((r) => !plainTransfer(r)) : rows;
  const answers = await rpc.callMany<unknown>([
    ...recipients.map((to) => ({ method: 'eth_getCode', params: [to, 'latest'] })),
    ...(trusted ? [{ method: 'eth_getBalance', params: [first.from_address, 'latest'] }] : []),
    ...estimated.map(estimateCall),
  ]);
  const codeOf = new Map(recipients.map((to, i) => [to, answers[i]]));
  const balance = trusted ? quantityOf(answers[recipients.length]) : undefined;
  const estimates = answers.slice(recipients.length + (trusted ? 1 : 0));
  const codeless = (r: Needing) => plainTransfer(r) && codeOf.get(r.to_address!) === '0x';
  const learnt: bigint[] = [];
  estimated.forEach((r, i) => {
    const gas = gasFrom(estimates[i]);
    if (typeof gas !== 'bigint') return void out.set(r.id, gas);
    if (codeless(r)) learnt.push(gas);
    out.set(r.id, withMargin(gas));
  });
  // Trusted only when every transfer of the batch was estimated at the intrinsic gas.
  if (learnt.length > 0) transfers.learn(learnt.find((g) => g !== TRANSFER_GAS) ?? TRANSFER_GAS);
  if (!trusted) return out;
  // Trusted: a transfer to an account without code takes the intrinsic gas; one to code (or whose recipient's code the node did not tell) is estimated.
  const again: Needing[] = [];
  for (const r of plain) {
    if (!codeless(r) || balance === undefined) again.push(r);
    else if (BigInt(r.value) > balance) out.set(r.id, { message: `The wallet's balance (${balance} wei) is less than the value sent (${r.value} wei).` });
    else out.set(r.id, TRANSFER_GAS);
  }
  if (again.length === 0) return out;
  const more = await rpc.callMany<unknown>(again.map(estimateCall));
  again.forEach((r, i) => {
    const gas = gasFrom(more[i]);
    out.set(r.id, typeof gas === 'bigint' ? withMargin(gas) : gas);
  });
  return out;
}
