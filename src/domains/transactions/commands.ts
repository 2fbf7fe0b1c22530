import type { Knex } from 'knex';
import type { Clock } from '../../platform/runtime/clock.js';
import type { Logger } from '../../platform/logging/logger.js';
import { AppError, NotFoundError, ValidationError } from '../../platform/http/errors.js';
import type { Page } from '../../platform/http/pagination.js';
import { checksumAddress } from '../../platform/eth/address.js';
import type { ProjectScope } from '../../access/tenancy/scope.js';
import type { AppContext } from '../../platform/http/context.js';
import type { ActiveWallet } from '../wallets/activated.js';
import type { TransactionEngine } from './engine.js';
import {
  attemptsOf,
  findProjectTransaction,
  listTransactions,
  reloadTransaction,
  TERMINAL,
  type TransactionFilter,
  type TransactionRow,
} from './repository.js';
import { DATA_MAX_BYTES, RpcSendParams } from './schemas.js';
import { checkPart } from '../../platform/http/validate.js';
import { besideRequest } from '../../platform/db/held.js';

export interface TransactionDeps {
  db: Knex;
  engine: TransactionEngine;
  now: Clock;
  log: Logger;
  /** How long a send waits for its queue (another request's turn) before answering as it stands. */
  sendWaitMs: number;
}

/** A send as the endpoints take it (quantities as JSON gives them). */
export interface SendInput {
  chainId: number;
  to?: string | null | undefined;
  value?: string | number | undefined;
  data?: string | undefined;
  gas?: string | number | undefined;
  maxFeePerGas?: string | number | undefined;
  maxPriorityFeePerGas?: string | number | undefined;
}

/** A send request's key: its Idempotency-Key with whose records it is in (a user's, a token's), or undefined without one. */
export function requestKeyOf(ctx: AppContext, owner: string): string | undefined {
  const key = ctx.headers['idempotency-key'];
  return typeof key === 'string' ? `${ctx.state.userKey ?? owner}\n${key}` : undefined;
}

export interface Sender {
  caller: 'user' | 'server';
  actor: string;
  requestId: string | null;
  /** The request's Idempotency-Key and whose it is (requestKeyOf): a request run again finds the send it made. */
  requestKey?: string | undefined;
}

const bad = (path: string, message: string, code = 'validation_failed'): never => {
  throw new ValidationError(`The transaction is not valid: ${path} ${message}.`, [{ in: 'body', path, message }], code);
};
const quantity = (v: string | number | undefined): bigint | undefined => (v === undefined ? undefined : BigInt(v));
const GAS_MAX = 1n << 63n;

/**
 * Accepts a send from the wallet (docs/transactions.md): checked against the chain's
 * configuration, written `queued` with its event, then worked at once when its queue is free (its
 * nonce, gas and fees, the policy's decision on the final fields, its signed bytes recorded, the
 * broadcast). The answer is the transaction once its own broadcast is recorded, or as it stands
 * when the turn ends without it; the turn goes on beside the answer with the sends queued behind,
 * and the worker from wherever a turn stopped.
 */
export async function sendTransaction(
  deps: TransactionDeps,
  wallet: ActiveWallet,
  project: { id: number; organisation_id: number },
  input: SendInput,
  who: Sender,
  at: string = '',
  /** Wait for this send's turn when another holds its queue (`eth_sendTransaction` answers its hash). */
  wait = false,
): Promise<TransactionRow> {
  const chain = deps.engine.chains.get(input.chainId);
  if (!chain) bad(`${at}/chainId`, 'is not a chain this deployment sends on', 'unknown_chain');
  const config = chain!.config;
  let to: string | null = null;
  if (input.to !== undefined && input.to !== null)
    to = checksumAddress(input.to)?.toLowerCase() ?? bad(`${at}/to`, 'is not an address (a mixed-case one must carry its EIP-55 checksum)');
  const data = Buffer.from((input.data ?? '0x').slice(2), 'hex');
  if (data.length > DATA_MAX_BYTES) bad(`${at}/data`, `is longer than ${DATA_MAX_BYTES} bytes`);
  if (to === null && data.length === 0) bad(`${at}/data`, 'is required for a contract creation (no `to`)');
  const gas = quantity(input.gas);
  if (gas !== undefined && (gas < 21_000n || gas >= GAS_MAX)) bad(`${at}/gas`, 'must be from 21000 to 2^63');
  const maxFee = quantity(input.maxFeePerGas);
  const tip = quantity(input.maxPriorityFeePerGas);
  if ((maxFee === undefined) !== (tip === undefined)) bad(`${at}/maxFeePerGas`, 'and maxPriorityFeePerGas are given together or not at all');
  if (maxFee !== undefined && tip !== undefined) {
    if (tip > maxFee) bad(`${at}/maxPriorityFeePerGas`, 'must not exceed maxFeePerGas');
    if (maxFee > config.maxFeePerGas) bad(`${at}/maxFeePerGas`, `is above the chain's cap of ${config.maxFeePerGas} wei`, 'fee_above_cap');
    if (tip > config.maxPriorityFeePerGas) bad(`${at}/maxPriorityFeePerGas`, `is above the chain's cap of ${config.maxPriorityFeePerGas} wei`, 'fee_above_cap');
  }
  const value = quantity(input.value) ?? 0n;
  const now = deps.now();
  const from = wallet.address.toLowerCase();
  const row = await deps.engine.accept(
    {
      organisation_id: project.organisation_id,
      project_id: project.id,
      wallet_id: wallet.id,
      chain_id: config.chainId,
      from_address: from,
      to_address: to,
      value: value.toString(),
      data,
      gas: gas?.toString() ?? null,
      max_fee_per_gas: maxFee?.toString() ?? null,
      max_priority_fee_per_gas: tip?.toString() ?? null,
      kind: 'send',
      caller: who.caller,
      actor: who.actor,
      expires_at: new Date(now + config.queuedTtlMs),
      request_key: who.requestKey ?? null,
    },
    new Date(now),
    who.requestId,
  );
  const { answer, forget } = deps.engine.awaitAnswer(row.id);
  const driving = besideRequest(() => deps.engine.drive(config.chainId, from, { id: row.id, until: now + deps.sendWaitMs, wait })).then(
    (worked) => ({ worked }),
    (err: unknown) => {
      // Accepted and written: the worker works the queue if this request could not.
      deps.log.warn({ err: err instanceof Error ? err.message : String(err), transactionId: row.id }, 'a send was accepted but not worked at once');
      return { worked: true };
    },
  );
  // Written `submitted` by this request's broadcast or another's: answered as written (no read
  // again), while the queue's turn goes on with the sends queued behind it.
  const first = await Promise.race([answer.then((broadcast) => ({ broadcast })), driving]);
  if ('broadcast' in first && first.broadcast) return first.broadcast;
  const { worked } = await driving;
  forget();
  const broadcast = await answer;
  if (broadcast) return broadcast;
  // Another request or process holds its queue: it is answered as accepted, queued.
  if (!worked && !wait) return row;
  return (await reloadTransaction(deps.db, row.id)) ?? row;
}

export async function getTransaction(
  db: Knex,
  scope: ProjectScope,
  id: number,
): Promise<{ row: TransactionRow; attempts: Awaited<ReturnType<typeof attemptsOf>> }> {
  const row = await findProjectTransaction(db, scope.projectId, id);
  if (!row) throw new NotFoundError('No such transaction.');
  return { row, attempts: await attemptsOf(db, id) };
}

export async function listProjectTransactions(db: Knex, scope: ProjectScope, filter: TransactionFilter, page: Page): Promise<TransactionRow[]> {
  return listTransactions(db, scope.projectId, filter, page);
}

const settled = (row: TransactionRow): AppError =>
  new AppError(
    409,
    'transaction_settled',
    'Conflict',
    `The transaction is ${row.status}: it can no longer be ${row.status === 'mined' ? 'replaced (it is in a block)' : 'changed'}.`,
  );

/** Cancels a send: at once while queued, else a no-op at its nonce with higher fees (docs/transactions.md). */
export async function cancelTransaction(deps: TransactionDeps, scope: ProjectScope, id: number, requestId: string | null): Promise<TransactionRow> {
  const row = await findProjectTransaction(deps.db, scope.projectId, id);
  if (!row) throw new NotFoundError('No such transaction.');
  if (row.status === 'mined' || TERMINAL.includes(row.status)) throw settled(row);
  if (row.kind === 'gapFill') throw new AppError(409, 'gap_fill', 'Conflict', 'A gap fill is itself a no-op: it is not cancelled.');
  return deps.engine.cancel(row, requestId);
}

/** Re-prices a signed send now, within the chain's caps. */
export async function speedUpTransaction(deps: TransactionDeps, scope: ProjectScope, id: number): Promise<TransactionRow> {
  const row = await findProjectTransaction(deps.db, scope.projectId, id);
  if (!row) throw new NotFoundError('No such transaction.');
  if (row.status === 'mined' || TERMINAL.includes(row.status)) throw settled(row);
  if (row.status === 'queued')
    throw new AppError(
      409,
      'not_signed',
      'Conflict',
      `The transaction is not signed yet${row.waiting ? ` (waiting: ${row.waiting})` : ''}: there is nothing to re-price.`,
    );
  return deps.engine.speedUp(row);
}

/**
 * `eth_sendTransaction` on the rpc endpoints (docs/transactions.md): the send, answered with the
 * hash of its first signed bytes, as EIP-1193 clients expect; a send still queued when its wait
 * runs out (fees above the cap) is answered `202` with its id and no hash; one refused by the
 * policy is `403 policy_denied`, one the node or its estimate refused `422 transaction_failed`.
 */
export async function sendFromRpc(
  deps: TransactionDeps,
  wallet: ActiveWallet,
  project: { id: number; organisation_id: number },
  params: unknown,
  who: Sender,
): Promise<{ status: 200 | 202; body: Record<string, unknown> }> {
  const { transaction } = checkPart(RpcSendParams, params, '/params');
  // `type` is 2 or absent (the schema says so): every send is an EIP-1559 transaction.
  const { from, chainId, ...fields } = transaction;
  const rest = { ...fields, type: undefined };
  if (from !== undefined && from.toLowerCase() !== wallet.address.toLowerCase()) bad('/params/transaction/from', 'is not the signing wallet');
  if (chainId === undefined) bad('/params/transaction/chainId', 'is required: the chain to send on');
  const id = BigInt(chainId as string | number);
  if (id > BigInt(Number.MAX_SAFE_INTEGER)) bad('/params/transaction/chainId', 'is not a chain this deployment sends on', 'unknown_chain');
  let row = await sendTransaction(deps, wallet, project, { ...rest, chainId: Number(id) }, who, '/params/transaction', true);
  // Signed by the request that held the queue: its hash is on the row once that request is through.
  while (row.status === 'queued' && row.waiting === null && deps.now() < row.created_at.getTime() + deps.sendWaitMs) {
    await new Promise((r) => setTimeout(r, 20));
    row = (await reloadTransaction(deps.db, row.id)) ?? row;
  }
  if (row.status === 'failed') {
    if (row.error?.code === 'policy_denied') throw new AppError(403, 'policy_denied', 'Forbidden', row.error.message);
    throw new AppError(422, 'transaction_failed', 'Unprocessable Entity', `${row.error?.message ?? 'The transaction failed.'} (transaction ${row.id})`);
  }
  if (row.hash === null) return { status: 202, body: { transactionId: row.id, status: row.status, waiting: row.waiting } };
  return { status: 200, body: { hash: row.hash, transactionId: row.id } };
}
