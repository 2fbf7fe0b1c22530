import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Executor } from '../../platform/db/knex.js';
import { AppError, DependencyUnavailableError } from '../../platform/http/errors.js';
import type { Logger } from '../../platform/logging/logger.js';
import type { Clock } from '../../platform/runtime/clock.js';
import { broadcastFact, RpcError, RpcUnavailable } from '../../platform/eth/rpc.js';
import { isUniqueViolation } from '../../platform/db/pg-errors.js';
import { NonceConflictError, type ProjectUid } from '../../platform/signer/client.js';
import { setRecent } from '../../platform/runtime/recent.js';
import type { ActiveWallet } from '../wallets/activated.js';
import { recordAudit } from '../audit/record.js';
import { recordEventIfSubscribed } from '../webhooks/record.js';
import type { EventType } from '../webhooks/catalogue.js';
import { projectById } from '../projects/commands.js';
import { walletById } from '../wallets/commands.js';
import { decideAndSign, type SignDeps } from '../signing/sign.js';
import type { Chain, Chains } from './chains.js';
import { feesFor, replacementFees, type Fees } from './fees.js';
import { presentTransaction } from './presenter.js';
import {
  attemptsOf,
  attemptsOfMany,
  claimQueue,
  createQueue,
  deleteAttempt,
  expiredQueued,
  giveNonceBack,
  insertAttempt,
  insertTransaction,
  transactionOfRequest,
  liveNonces,
  newestOfQueue,
  reloadTransaction,
  advanceTransaction,
  nextQueued,
  queueOf,
  raiseNonce,
  releaseQueue,
  takeNonce,
  unsettled,
  updateAttempt,
  updateTransaction,
  type AttemptRow,
  type NewTransaction,
  type Status,
  type TransactionRow,
} from './repository.js';

export interface EngineDeps {
  db: Knex;
  now: Clock;
  log: Logger;
  chains: Chains;
  sign: SignDeps;
  /** How long a process holds a queue's lease: renewed with each send it takes. */
  leaseMs: number;
}

/** Sends of one queue signed in one turn of its lease before others get theirs. */
const PER_TURN = 200;
/** Transactions of a chain looked at per pass. */
const PER_PASS = 2_000;
/** Calls to a chain's RPC in flight per pass. */
const RPC_PARALLEL = 16;
/** What a cancel or gap fill costs in gas: a plain transfer. */
const NO_OP_GAS = 21_000n;

/** A node's hex quantity; 0 for anything else. */
const quantityOf = (v: unknown): bigint => (typeof v === 'string' && /^0x[0-9a-fA-F]{1,64}$/.test(v) ? BigInt(v) : 0n);
const hexQ = (v: bigint): string => `0x${v.toString(16)}`;
const hexB = (b: Buffer): string => `0x${b.toString('hex')}`;

/**
 * One status change of a transaction, in the caller's database transaction: the row (its event
 * count goes up by one), the event (`wallet.transaction.*`, with that count as `sequence`) and an
 * audit entry, committed together or not at all.
 */
export async function change(
  tx: Executor,
  row: TransactionRow,
  patch: Partial<TransactionRow>,
  event: EventType,
  at: Date,
  requestId: string | null = null,
): Promise<TransactionRow> {
  const next = await advanceTransaction(tx, row.id, row.sequence, patch, event);
  // Another process changed it first, and announced its change.
  if (!next) return (await reloadTransaction(tx, row.id)) ?? row;
  // A stream: each subscription receives a transaction's events in this order (webhooks/deliver.ts).
  const data = { ...presentTransaction(next, undefined, false), stream: `transaction:${next.id}`, sequence: next.sequence, events: next.events };
  await recordEventIfSubscribed(tx, next.project_id, { type: event, data, walletId: next.wallet_id }, at);
  await recordAudit(tx, {
    organisation_id: next.organisation_id,
    project_id: next.project_id,
    actor: next.actor,
    action: event,
    target: `transaction:${next.id}`,
    status: next.status === 'failed' ? 422 : 200,
    request_id: requestId,
    details: {
      walletId: next.wallet_id,
      chainId: next.chain_id,
      status: next.status,
      nonce: next.nonce,
      hash: next.hash,
      sequence: next.sequence,
      error: next.error,
    },
  });
  return next;
}

/** Accepts a send: a `queued` row and its event, in the caller's transaction; the one its request key made already, if any. */
export async function accept(tx: Executor, t: NewTransaction, at: Date, requestId: string | null): Promise<TransactionRow> {
  const row = await insertTransaction(tx, t);
  if (!row) {
    const existing = t.request_key === null ? undefined : await transactionOfRequest(tx, t.project_id, t.request_key);
    if (!existing) throw new Error('a send neither inserted nor found by its request key');
    return existing;
  }
  return change(tx, row, {}, 'wallet.transaction.queued', at, requestId);
}

const EVENT_OF: Partial<Record<Status, EventType>> = {
  signed: 'wallet.transaction.signed',
  submitted: 'wallet.transaction.submitted',
  mined: 'wallet.transaction.mined',
  confirmed: 'wallet.transaction.confirmed',
  failed: 'wallet.transaction.failed',
  replaced: 'wallet.transaction.replaced',
  cancelled: 'wallet.transaction.cancelled',
  expired: 'wallet.transaction.expired',
};

/** What stopped a queue's turn, or that it goes on. */
type Step = 'next' | 'stop';

/** Wallets and projects kept per process (a wallet's key and address, a project's identity never change once set). */
const KEPT = 10_000;

export class TransactionEngine {
  readonly #wallets = new Map<number, ActiveWallet>();
  readonly #projects = new Map<number, { id: number; uid: ProjectUid; organisation_id: number }>();

  constructor(private readonly deps: EngineDeps) {}

  async #signingParts(row: TransactionRow): Promise<{ wallet: ActiveWallet; project: { id: number; uid: ProjectUid; organisation_id: number } } | undefined> {
    let wallet = this.#wallets.get(row.wallet_id);
    if (!wallet) {
      wallet = await walletById(this.deps.db, row.wallet_id);
      if (wallet) setRecent(this.#wallets, row.wallet_id, wallet, KEPT);
    }
    let project = this.#projects.get(row.project_id);
    if (!project) {
      const p = await projectById(this.deps.db, row.project_id);
      if (p) {
        project = { id: p.id, uid: p.uid, organisation_id: p.organisation_id };
        setRecent(this.#projects, row.project_id, project, KEPT);
      }
    }
    return wallet && project ? { wallet, project } : undefined;
  }

  get chains(): Chains {
    return this.deps.chains;
  }

  async #to(row: TransactionRow, status: Status, patch: Partial<TransactionRow> = {}): Promise<TransactionRow> {
    const event = EVENT_OF[status];
    if (!event) throw new Error(`no event for ${status}`);
    const at = new Date(this.deps.now());
    return this.deps.db.transaction((tx) => change(tx, row, { ...patch, status }, event, at));
  }

  /** Notes why a transaction waits, without an event (it is no change of status). */
  async #wait(row: TransactionRow, why: string | null): Promise<void> {
    if (row.waiting !== why) await updateTransaction(this.deps.db, row.id, { waiting: why });
  }

  // ---- Sending: a queue's transactions signed at their nonces, in order ---------------------

  /**
   * Works a queue (one chain, one address) under its lease: each queued transaction gets the
   * next nonce, its gas and fees, is signed under the policy and broadcast, oldest first. A
   * transaction whose fees are above the cap stops the turn: the queue waits (nothing behind it
   * takes its nonce). Another process holding the lease will see what was queued meanwhile: it
   * looks again after it lets go.
   */
  async drive(chainId: number, address: string, own?: { id: number; until: number; wait: boolean }): Promise<void> {
    const chain = this.deps.chains.get(chainId);
    if (!chain) return;
    for (let round = 0; ; round++) {
      const owner = randomUUID();
      let claimed = await claimQueue(this.deps.db, chainId, address, owner, this.deps.leaseMs);
      if (claimed === 'absent') {
        let count: string;
        try {
          count = await chain.rpc.call<string>('eth_getTransactionCount', [address, 'pending']);
        } catch (err) {
          if (err instanceof RpcUnavailable || err instanceof RpcError) return;
          throw err;
        }
        await createQueue(this.deps.db, chainId, address, BigInt(count));
        claimed = await claimQueue(this.deps.db, chainId, address, owner, this.deps.leaseMs);
      }
      if (claimed === undefined || claimed === 'absent') {
        // Another request or process works the queue, and will reach this send. Only a caller
        // that must answer with its send's hash waits for it (or for its own turn).
        if (!own?.wait) return;
        if (this.deps.now() >= own.until || (await reloadTransaction(this.deps.db, own.id))?.status !== 'queued') return;
        await sleep(15 + Math.random() * 10);
        continue;
      }
      let stopped = false;
      try {
        for (let i = 0; i < PER_TURN; i++) {
          const row = await nextQueued(this.deps.db, chainId, address);
          if (!row) break;
          if ((await this.#advance(chain, row, owner)) === 'stop') {
            stopped = true;
            break;
          }
        }
      } finally {
        await releaseQueue(this.deps.db, chainId, address, owner);
      }
      // What was queued after the last look, while the lease was still held, is this holder's to see.
      if (stopped || round >= 2 || !(await nextQueued(this.deps.db, chainId, address))) return;
    }
  }

  /** The next queued transaction: its attempt prepared (fields and nonce written first), then signed and sent. */
  async #advance(chain: Chain, row: TransactionRow, owner: string): Promise<Step> {
    // An attempt is prepared with its nonce on the row: without one there is none to finish.
    const prepared = row.nonce === null ? undefined : (await attemptsOf(this.deps.db, row.id)).find((a) => a.status === 'prepared');
    if (prepared) return this.#signAndSend(chain, row, prepared, owner);
    let gas: bigint;
    if (row.gas !== null) gas = BigInt(row.gas);
    else if (row.kind === 'gapFill') gas = NO_OP_GAS;
    else {
      try {
        const estimate = await chain.rpc.call<string>('eth_estimateGas', [
          { from: row.from_address, ...(row.to_address ? { to: row.to_address } : {}), value: hexQ(BigInt(row.value)), data: hexB(row.data) },
        ]);
        gas = (BigInt(estimate) * BigInt(100 + chain.config.gasMarginPercent)) / 100n;
      } catch (err) {
        if (err instanceof RpcError) {
          await this.#to(row, 'failed', { waiting: null, error: { code: 'estimate_failed', message: `The node's gas estimate failed: ${err.message}` } });
          return 'next';
        }
        if (err instanceof RpcUnavailable) {
          await this.#wait(row, 'rpc_unavailable');
          return 'stop';
        }
        throw err;
      }
    }
    let fees: Fees | undefined;
    if (row.max_fee_per_gas !== null && row.max_priority_fee_per_gas !== null)
      fees = { maxFeePerGas: BigInt(row.max_fee_per_gas), maxPriorityFeePerGas: BigInt(row.max_priority_fee_per_gas) };
    else {
      try {
        fees = feesFor(chain.config, await chain.fees.market());
      } catch (err) {
        if (err instanceof RpcUnavailable || err instanceof RpcError) {
          await this.#wait(row, 'rpc_unavailable');
          return 'stop';
        }
        throw err;
      }
    }
    if (!fees) {
      // Nothing is signed above the cap: the queue waits, and drains when fees fall.
      await this.#wait(row, 'fees_above_cap');
      return 'stop';
    }
    const attempt = await this.deps.db.transaction(async (tx) => {
      const nonce =
        row.kind === 'gapFill' && row.nonce !== null ? BigInt(row.nonce) : await takeNonce(tx, row.chain_id, row.from_address, owner, this.deps.leaseMs);
      if (nonce === undefined) return undefined;
      await updateTransaction(tx, row.id, { nonce: nonce.toString(), waiting: null });
      return insertAttempt(tx, {
        transaction_id: row.id,
        purpose: row.kind === 'gapFill' ? 'gapFill' : 'send',
        nonce: nonce.toString(),
        gas: gas.toString(),
        max_fee_per_gas: fees.maxFeePerGas.toString(),
        max_priority_fee_per_gas: fees.maxPriorityFeePerGas.toString(),
        replaces: null,
      });
    });
    // The lease lapsed: another process works the queue now.
    if (!attempt) return 'stop';
    return this.#signAndSend(chain, { ...row, nonce: attempt.nonce }, attempt, owner);
  }

  /**
   * Signs a prepared attempt under the policy (the signer sees `eth_sendTransaction` with its
   * purpose and final fields), records the signed bytes, then broadcasts them. `owner`: the
   * queue's lease, for an original send (its nonce is given back when nothing was signed at it).
   */
  async #signAndSend(chain: Chain, row: TransactionRow, attempt: AttemptRow, owner?: string): Promise<Step> {
    const { db } = this.deps;
    const parts = await this.#signingParts(row);
    if (!parts) {
      await deleteAttempt(db, attempt.id);
      await this.#to(row, 'failed', { error: { code: 'wallet_gone', message: 'The wallet or its project no longer exists.' } });
      return 'next';
    }
    const noOp = attempt.purpose === 'cancel' || attempt.purpose === 'gapFill';
    const gas = BigInt(attempt.gas);
    const maxFee = BigInt(attempt.max_fee_per_gas);
    const value = noOp ? 0n : BigInt(row.value);
    const transaction = {
      type: 2,
      chainId: String(row.chain_id),
      nonce: attempt.nonce,
      gas: attempt.gas,
      maxFeePerGas: attempt.max_fee_per_gas,
      maxPriorityFeePerGas: attempt.max_priority_fee_per_gas,
      ...(noOp ? { to: row.from_address } : row.to_address ? { to: row.to_address } : {}),
      value: value.toString(),
      ...(noOp ? {} : { data: hexB(row.data) }),
    };
    const replaced = attempt.replaces ? (await attemptsOf(db, row.id)).find((a) => a.hash === attempt.replaces) : undefined;
    const operation = {
      method: 'eth_sendTransaction',
      params: { transaction, purpose: attempt.purpose, ...(attempt.replaces ? { replaces: attempt.replaces } : {}) },
    };
    const who = { caller: row.caller, actor: row.actor, requestId: null };
    const { wallet, project: projectRef } = parts;
    const budget = { cost: gas * maxFee + value, ...(replaced?.signature_id ? { replacing: Number(replaced.signature_id) } : {}) };
    // The first signature of a transaction (a send or a gap fill); after it, fee bumps and cancels.
    const original = row.status === 'queued';
    let outcome: Awaited<ReturnType<typeof decideAndSign>>;
    try {
      outcome = await decideAndSign(this.deps.sign, wallet, projectRef, operation, who, budget);
    } catch (err) {
      if (err instanceof NonceConflictError) return this.#nonceTaken(row, attempt, err.signed, owner);
      if (err instanceof DependencyUnavailableError) return 'stop';
      if (err instanceof AppError && err.status < 500) {
        await this.#unsigned(row, attempt, owner, original, { code: err.code, message: err.detail });
        return 'next';
      }
      throw err;
    }
    if (!outcome.allowed) {
      await this.#unsigned(row, attempt, owner, original, { code: 'policy_denied', message: outcome.message });
      return 'next';
    }
    const raw = Buffer.from(String(outcome.result['signedTransaction']).slice(2), 'hex');
    const hash = String(outcome.result['hash']);
    // The signed bytes are written before they leave: after any crash, these same bytes go again.
    const at = new Date(this.deps.now());
    let signedRow: TransactionRow;
    try {
      signedRow = await db.transaction(async (tx) => {
        await updateAttempt(tx, attempt.id, { status: 'signed', hash, raw, signature_id: outcome.reserved === undefined ? null : String(outcome.reserved) });
        if (original) return change(tx, row, { status: 'signed', hash, waiting: null }, 'wallet.transaction.signed', at);
        // A fee bump or a cancel: the transaction's hash is the newest attempt's.
        return change(tx, row, { hash, waiting: null, speed_up_requested: false }, 'wallet.transaction.repriced', at);
      });
    } catch (err) {
      // The same replacement, made at once by the worker and a request: one attempt holds those bytes already.
      if (!isUniqueViolation(err)) throw err;
      await deleteAttempt(db, attempt.id);
      return 'next';
    }
    return this.#broadcast(chain, signedRow, { ...attempt, status: 'signed', hash, raw });
  }

  /** The signer holds another transaction at this nonce that this queue does not know of. */
  async #nonceTaken(row: TransactionRow, attempt: AttemptRow, signed: string[], owner: string | undefined): Promise<Step> {
    const last = signed[signed.length - 1];
    if (attempt.purpose === 'send' || last === undefined) {
      // The nonce is someone else's (the key signed elsewhere): this send takes the next one; a gap fill covers it if nothing lands there.
      await this.deps.db.transaction(async (tx) => {
        await deleteAttempt(tx, attempt.id);
        await updateTransaction(tx, row.id, { nonce: null });
      });
      this.deps.log.warn(
        { transactionId: row.id, chainId: row.chain_id, nonce: attempt.nonce },
        'the signer holds another transaction at the nonce: taking the next',
      );
      return owner ? 'next' : 'stop';
    }
    // A replacement or gap fill names what the signer holds there, and is asked once more.
    if (attempt.replaces === last) return 'stop';
    await updateAttempt(this.deps.db, attempt.id, { replaces: last });
    const chain = this.deps.chains.get(row.chain_id);
    return chain ? this.#signAndSend(chain, row, { ...attempt, replaces: last }, owner) : 'stop';
  }

  /** Nothing was signed: the attempt goes; an original send fails and gives its nonce back. */
  async #unsigned(
    row: TransactionRow,
    attempt: AttemptRow,
    owner: string | undefined,
    original: boolean,
    error: { code: string; message: string },
  ): Promise<void> {
    const at = new Date(this.deps.now());
    await this.deps.db.transaction(async (tx) => {
      await deleteAttempt(tx, attempt.id);
      if (!original) {
        // A refused replacement leaves the transaction as it was, saying why.
        await updateTransaction(tx, row.id, { waiting: error.code, speed_up_requested: false });
        return;
      }
      if (owner && row.kind === 'send') await giveNonceBack(tx, row.chain_id, row.from_address, owner, BigInt(attempt.nonce));
      await change(tx, row, { status: 'failed', error, waiting: null, ...(row.kind === 'send' ? { nonce: null } : {}) }, 'wallet.transaction.failed', at);
    });
  }

  /** Sends an attempt's recorded bytes; what the node answers is a fact about the transaction, unless no URL answers at all. */
  async #broadcast(chain: Chain, row: TransactionRow, attempt: AttemptRow): Promise<Step> {
    if (!attempt.raw) return 'next';
    let fact: ReturnType<typeof broadcastFact> | 'sent';
    try {
      await chain.rpc.call('eth_sendRawTransaction', [hexB(attempt.raw)]);
      fact = 'sent';
    } catch (err) {
      if (err instanceof RpcUnavailable) {
        await this.#wait(row, 'rpc_unavailable');
        return 'stop';
      }
      if (!(err instanceof RpcError)) throw err;
      fact = broadcastFact(err);
      if (fact === 'invalid') {
        await this.#to(row, 'failed', { error: { code: 'rejected', message: `The node refused the transaction: ${err.message}` } });
        return 'next';
      }
    }
    if (fact === 'underpriced' || fact === 'insufficient_funds') {
      await this.#wait(row, fact);
      return 'stop';
    }
    // Sent, already known, or its nonce already used (the settling pass finds which of ours was mined, or calls it replaced).
    const at = new Date(this.deps.now());
    await this.deps.db.transaction(async (tx) => {
      if (attempt.status !== 'broadcast') await updateAttempt(tx, attempt.id, { status: 'broadcast', broadcast_at: at });
      if (row.status === 'signed') await change(tx, row, { status: 'submitted', submitted_at: at, waiting: null }, 'wallet.transaction.submitted', at);
      else if (row.waiting !== null) await updateTransaction(tx, row.id, { waiting: null });
    });
    return 'next';
  }

  // ---- Settling: receipts, depth, reorgs, stuck and dropped transactions, gaps --------------

  /**
   * One pass over a chain's unsettled transactions (docs/transactions.md): a receipt makes a
   * transaction `mined`; a block that left the canonical chain makes it `submitted` again and its
   * same bytes go again; depth makes it `confirmed` (or `failed` if it reverted, `cancelled` if
   * the cancel was mined); a nonce used by none of its attempts makes it `replaced`; a stuck one
   * is re-priced within the caps; the rest are sent again as they are (a node that dropped one
   * takes it back). Gaps under a queue's transactions get a gap fill; queued sends past their
   * time expire.
   */
  async settle(chainId: number): Promise<void> {
    const chain = this.deps.chains.get(chainId);
    if (!chain) return;
    // One pass per chain at a time across the worker processes; the lock goes with its transaction.
    await this.deps.db.transaction(async (lock) => {
      const { rows } = await lock.raw<{ rows: Array<{ got: boolean }> }>(`SELECT pg_try_advisory_xact_lock(hashtext('custody:settle'), ?::int) AS got`, [
        chainId % 2_147_483_647,
      ]);
      if (rows[0]?.got) await this.#settlePass(chain);
    });
  }

  async #settlePass(chain: Chain): Promise<void> {
    const chainId = chain.config.chainId;
    await this.#expire();
    let head: bigint;
    try {
      head = BigInt(await chain.rpc.call<string>('eth_blockNumber', []));
    } catch (err) {
      if (err instanceof RpcUnavailable || err instanceof RpcError) return;
      throw err;
    }
    const rows = await unsettled(this.deps.db, chainId, PER_PASS);
    const attempts = await attemptsOfMany(
      this.deps.db,
      rows.map((r) => r.id),
    );
    const counts = new Map<string, Promise<bigint>>();
    const countOf = (address: string): Promise<bigint> => {
      let c = counts.get(address);
      if (!c) {
        c = chain.rpc.call<string>('eth_getTransactionCount', [address, 'latest']).then(BigInt);
        counts.set(address, c);
      }
      return c;
    };
    await inParallel(rows, RPC_PARALLEL, async (row) => {
      try {
        await this.#settleOne(chain, row, attempts.get(row.id) ?? [], head, countOf);
      } catch (err) {
        if (err instanceof RpcUnavailable || err instanceof RpcError) return;
        throw err;
      }
    });
    const addresses = [...new Set(rows.filter((r) => r.status !== 'mined').map((r) => r.from_address))];
    await inParallel(addresses, RPC_PARALLEL, async (address) => {
      try {
        await this.#fillGap(chain, address, await countOf(address), rows);
      } catch (err) {
        if (err instanceof RpcUnavailable || err instanceof RpcError) return;
        throw err;
      }
    });
  }

  async #settleOne(chain: Chain, row: TransactionRow, attempts: AttemptRow[], head: bigint, countOf: (a: string) => Promise<bigint>): Promise<void> {
    const { rpc, config } = chain;
    if (row.status === 'mined') {
      const block = await rpc.call<{ hash?: string } | null>('eth_getBlockByNumber', [hexQ(BigInt(row.block_number ?? '0')), false]);
      if (block?.hash !== row.block_hash) {
        // Its block left the canonical chain: submitted again, with the same bytes.
        const at = new Date(this.deps.now());
        const back = await this.deps.db.transaction((tx) =>
          change(tx, row, { status: 'submitted', block_number: null, block_hash: null, receipt: null }, 'wallet.transaction.reorged', at),
        );
        const mined = attempts.find((a) => a.hash === row.hash);
        if (mined) await this.#broadcast(chain, back, mined);
        return;
      }
      await this.#settleIfDeep(row, attempts, head, config.confirmations);
      return;
    }
    const live = attempts.filter((a) => a.hash !== null && (a.status === 'signed' || a.status === 'broadcast'));
    const receipts = await Promise.all(live.map((a) => rpc.call<Record<string, unknown> | null>('eth_getTransactionReceipt', [a.hash])));
    const index = receipts.findIndex((r) => r !== null && typeof r['blockHash'] === 'string');
    const receipt = receipts[index];
    const minedAttempt = live[index];
    if (receipt && minedAttempt) {
      const at = new Date(this.deps.now());
      const minedRow = await this.deps.db.transaction(async (tx) => {
        for (const a of live) if (a.id !== minedAttempt.id) await updateAttempt(tx, a.id, { status: 'superseded' });
        return change(
          tx,
          row,
          {
            status: 'mined',
            hash: minedAttempt.hash,
            waiting: null,
            block_number: quantityOf(receipt['blockNumber']).toString(),
            block_hash: String(receipt['blockHash']),
            receipt: {
              status: receipt['status'] === '0x1' ? 'success' : 'reverted',
              gasUsed: quantityOf(receipt['gasUsed']).toString(),
              effectiveGasPrice: quantityOf(receipt['effectiveGasPrice']).toString(),
            },
          },
          'wallet.transaction.mined',
          at,
        );
      });
      // Deep enough already (one confirmation, or a pass that came late): settled in this pass.
      if (minedRow.status === 'mined') await this.#settleIfDeep(minedRow, attempts, head, config.confirmations);
      return;
    }
    const nonce = BigInt(row.nonce ?? '0');
    if ((await countOf(row.from_address)) > nonce) {
      // Its nonce is used, by none of its attempts. A receipt can lag a block: decided on the next pass.
      if (row.waiting === 'nonce_used') await this.#to(row, 'replaced', { waiting: null });
      else await this.#wait(row, 'nonce_used');
      return;
    }
    const current = attempts[attempts.length - 1];
    if (!current) return;
    if (current.status === 'prepared') {
      await this.#signAndSend(chain, row, current);
      return;
    }
    const cancel = row.cancel_requested && current.purpose !== 'cancel';
    const stuck = this.deps.now() - current.created_at.getTime() >= config.stuckAfterMs;
    if (current.hash !== null && (cancel || row.speed_up_requested || stuck)) {
      if (await this.#replace(chain, row, current, cancel ? 'cancel' : current.purpose === 'send' ? 'speedUp' : current.purpose)) return;
    }
    // Sent again as it is: a node that dropped it takes it back, one that has it says so.
    await this.#broadcast(chain, row, current);
  }

  /** A mined transaction `confirmations` blocks deep: `confirmed`, `failed` (it reverted) or `cancelled` (its cancel was mined). */
  async #settleIfDeep(row: TransactionRow, attempts: AttemptRow[], head: bigint, confirmations: number): Promise<void> {
    if (head - BigInt(row.block_number ?? '0') + 1n < BigInt(confirmations)) return;
    const minedAttempt = attempts.find((a) => a.hash === row.hash);
    if (row.receipt?.['status'] !== 'success')
      await this.#to(row, 'failed', { error: { code: 'reverted', message: 'The transaction reverted; its receipt says so.' } });
    else if (minedAttempt?.purpose === 'cancel') await this.#to(row, 'cancelled');
    else await this.#to(row, 'confirmed');
  }

  /** A replacement at the same nonce with higher fees (a fee bump, a cancel); false when the caps leave no room. */
  async #replace(chain: Chain, row: TransactionRow, current: AttemptRow, purpose: AttemptRow['purpose']): Promise<boolean> {
    let market;
    try {
      market = await chain.fees.market();
    } catch (err) {
      if (err instanceof RpcUnavailable || err instanceof RpcError) return false;
      throw err;
    }
    const fees = replacementFees(
      chain.config,
      { maxFeePerGas: BigInt(current.max_fee_per_gas), maxPriorityFeePerGas: BigInt(current.max_priority_fee_per_gas) },
      market,
    );
    if (!fees) {
      await this.#wait(row, 'fees_above_cap');
      return false;
    }
    const noOp = purpose === 'cancel' || purpose === 'gapFill';
    const attempt = await insertAttempt(this.deps.db, {
      transaction_id: row.id,
      purpose,
      nonce: current.nonce,
      gas: noOp ? NO_OP_GAS.toString() : current.gas,
      max_fee_per_gas: fees.maxFeePerGas.toString(),
      max_priority_fee_per_gas: fees.maxPriorityFeePerGas.toString(),
      replaces: current.hash,
    });
    await this.#signAndSend(chain, row, attempt);
    return true;
  }

  /**
   * A nonce under the queue's next one that no live transaction holds, while a transaction after
   * it has waited longer than the chain's stuck time: nothing after it can be mined until
   * something is. It is filled with a no-op (a transfer of nothing to the wallet itself), itself a
   * policy-checked, audited send; if the signer holds a signature there, the fill names it as
   * replaced.
   */
  async #fillGap(chain: Chain, address: string, count: bigint, waiting: readonly TransactionRow[]): Promise<void> {
    const { db } = this.deps;
    const chainId = chain.config.chainId;
    const queue = await queueOf(db, chainId, address);
    if (!queue) return;
    const next = BigInt(queue.next_nonce);
    if (count > next) {
      // The key was used elsewhere: the queue goes on from the chain's count.
      await raiseNonce(db, chainId, address, count);
      return;
    }
    if (count >= next) return;
    const now = this.deps.now();
    const blocked = waiting.some(
      (r) =>
        r.from_address === address &&
        r.nonce !== null &&
        BigInt(r.nonce) > count &&
        now - (r.submitted_at ?? r.updated_at).getTime() >= chain.config.stuckAfterMs,
    );
    if (!blocked) return;
    const held = await liveNonces(db, chainId, address, count);
    if (held.has(count)) return;
    const of = await newestOfQueue(db, chainId, address);
    if (!of) return;
    const at = new Date(now);
    const fill = await db.transaction((tx) =>
      accept(
        tx,
        {
          organisation_id: of.organisation_id,
          project_id: of.project_id,
          wallet_id: of.wallet_id,
          chain_id: chainId,
          from_address: address,
          to_address: address,
          value: '0',
          data: Buffer.alloc(0),
          gas: NO_OP_GAS.toString(),
          max_fee_per_gas: null,
          max_priority_fee_per_gas: null,
          kind: 'gapFill',
          caller: 'server',
          actor: 'system:gap-fill',
          expires_at: new Date(now + chain.config.queuedTtlMs),
          nonce: count.toString(),
          request_key: null,
        },
        at,
        null,
      ),
    );
    this.deps.log.warn({ chainId, nonce: count.toString(), transactionId: fill.id }, 'a gap in a queue: filling it with a no-op');
    await this.drive(chainId, address);
  }

  /** Queued sends never signed whose time ran out. */
  async #expire(): Promise<void> {
    for (const row of await expiredQueued(this.deps.db, new Date(this.deps.now()), 500)) {
      await this.#to(row, 'expired', { waiting: null });
    }
  }

  // ---- What a caller asks of one transaction --------------------------------------------------

  /** A cancel: a queued send is cancelled at once; a signed one gets a no-op at its nonce, with higher fees. */
  async cancel(row: TransactionRow, requestId: string | null): Promise<TransactionRow> {
    if (row.status === 'queued' && row.nonce === null) {
      const at = new Date(this.deps.now());
      return this.deps.db.transaction((tx) => change(tx, row, { status: 'cancelled', waiting: null }, 'wallet.transaction.cancelled', at, requestId));
    }
    await updateTransaction(this.deps.db, row.id, { cancel_requested: true });
    await this.#now(row.id);
    return (await this.#reload(row.id)) ?? row;
  }

  /** A fee bump now, within the caps. */
  async speedUp(row: TransactionRow): Promise<TransactionRow> {
    await updateTransaction(this.deps.db, row.id, { speed_up_requested: true });
    await this.#now(row.id);
    return (await this.#reload(row.id)) ?? row;
  }

  async #reload(id: number): Promise<TransactionRow | undefined> {
    return reloadTransaction(this.deps.db, id);
  }

  /** Settles one transaction now rather than at the next pass. */
  async #now(id: number): Promise<void> {
    const row = await this.#reload(id);
    if (!row) return;
    const chain = this.deps.chains.get(row.chain_id);
    if (!chain || (row.status !== 'signed' && row.status !== 'submitted')) return;
    try {
      const head = BigInt(await chain.rpc.call<string>('eth_blockNumber', []));
      await this.#settleOne(chain, row, await attemptsOf(this.deps.db, row.id), head, (a) =>
        chain.rpc.call<string>('eth_getTransactionCount', [a, 'latest']).then(BigInt),
      );
    } catch (err) {
      if (err instanceof RpcUnavailable || err instanceof RpcError) return;
      throw err;
    }
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `fn` over `items`, at most `limit` at a time. */
async function inParallel<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await fn(item);
    }
  });
  await Promise.all(workers);
}
