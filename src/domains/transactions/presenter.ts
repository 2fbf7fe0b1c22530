import type { AttemptRow, TransactionRow } from './repository.js';

const hex = (b: Buffer): string => `0x${b.toString('hex')}`;

/** A transaction as the API answers it and its events carry (without `data` in events: it can be 128 KiB). */
export function presentTransaction(t: TransactionRow, attempts?: readonly AttemptRow[], withData = true): Record<string, unknown> {
  return {
    id: t.id,
    projectId: t.project_id,
    walletId: t.wallet_id,
    chainId: t.chain_id,
    kind: t.kind,
    status: t.status,
    waiting: t.waiting,
    from: t.from_address,
    to: t.to_address,
    value: t.value,
    ...(withData ? { data: hex(t.data) } : {}),
    nonce: t.nonce,
    hash: t.hash,
    blockNumber: t.block_number === null ? null : String(t.block_number),
    blockHash: t.block_hash,
    receipt: t.receipt,
    error: t.error,
    cancelRequested: t.cancel_requested,
    createdAt: t.created_at.toISOString(),
    updatedAt: t.updated_at.toISOString(),
    submittedAt: t.submitted_at?.toISOString() ?? null,
    expiresAt: t.expires_at.toISOString(),
    ...(attempts
      ? {
          events: t.events.map((type, i) => ({ sequence: i + 1, type })),
          attempts: attempts
            .filter((a) => a.hash !== null)
            .map((a) => ({
              hash: a.hash,
              purpose: a.purpose,
              nonce: a.nonce,
              gas: a.gas,
              maxFeePerGas: a.max_fee_per_gas,
              maxPriorityFeePerGas: a.max_priority_fee_per_gas,
              replaces: a.replaces,
              status: a.status,
              createdAt: a.created_at.toISOString(),
              broadcastAt: a.broadcast_at?.toISOString() ?? null,
            })),
        }
      : {}),
  };
}
