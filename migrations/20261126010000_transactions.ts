import type { Knex } from 'knex';

/**
 * Transactions the service sends (docs/transactions.md), owned by the transactions domain:
 * - `transactions`: one per accepted send (or gap fill), its status and where it was mined;
 * - `transaction_attempts`: each signed version of it (the original, fee bumps, a cancel), its
 *   fields written before it is signed and its signed bytes before they leave;
 * - `send_queues`: per chain and address, the next nonce and who is working the queue (a lease).
 * `wallet_signatures.cost` counts wei for the policy's budgets.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE transactions (
      id bigserial PRIMARY KEY,
      organisation_id bigint NOT NULL REFERENCES organisations(id) ON DELETE CASCADE,
      project_id bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      wallet_id bigint NOT NULL REFERENCES wallets(id) ON DELETE CASCADE,
      chain_id bigint NOT NULL,
      from_address text NOT NULL,
      to_address text,
      value numeric(78, 0) NOT NULL,
      data bytea NOT NULL,
      gas numeric(78, 0),
      max_fee_per_gas numeric(78, 0),
      max_priority_fee_per_gas numeric(78, 0),
      kind text NOT NULL CHECK (kind IN ('send', 'gapFill')),
      caller text NOT NULL CHECK (caller IN ('user', 'server')),
      actor text NOT NULL,
      status text NOT NULL CHECK (status IN ('queued', 'signed', 'submitted', 'mined', 'confirmed', 'failed', 'replaced', 'cancelled', 'expired')),
      waiting text,
      nonce numeric(20, 0),
      hash text,
      sequence integer NOT NULL DEFAULT 0,
      block_number bigint,
      block_hash text,
      receipt jsonb,
      error jsonb,
      cancel_requested boolean NOT NULL DEFAULT false,
      speed_up_requested boolean NOT NULL DEFAULT false,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      submitted_at timestamptz,
      expires_at timestamptz NOT NULL
    )`);
  // The queue of a chain and address, oldest first; the unsettled, per chain, for the tracker.
  await knex.raw(`CREATE INDEX transactions_queue ON transactions (chain_id, from_address, id) WHERE status IN ('queued', 'signed')`);
  await knex.raw(`CREATE INDEX transactions_unsettled ON transactions (chain_id, id) WHERE status IN ('signed', 'submitted', 'mined')`);
  await knex.raw('CREATE INDEX transactions_project ON transactions (project_id, id)');
  await knex.raw('CREATE INDEX transactions_wallet ON transactions (wallet_id, id)');
  await knex.raw(`
    CREATE TABLE transaction_attempts (
      id bigserial PRIMARY KEY,
      transaction_id bigint NOT NULL REFERENCES transactions(id) ON DELETE CASCADE,
      purpose text NOT NULL CHECK (purpose IN ('send', 'speedUp', 'cancel', 'gapFill')),
      nonce numeric(20, 0) NOT NULL,
      gas numeric(78, 0) NOT NULL,
      max_fee_per_gas numeric(78, 0) NOT NULL,
      max_priority_fee_per_gas numeric(78, 0) NOT NULL,
      replaces text,
      status text NOT NULL CHECK (status IN ('prepared', 'signed', 'broadcast', 'superseded')),
      hash text,
      raw bytea,
      signature_id bigint,
      created_at timestamptz NOT NULL DEFAULT now(),
      broadcast_at timestamptz
    )`);
  await knex.raw('CREATE INDEX transaction_attempts_of ON transaction_attempts (transaction_id, id)');
  await knex.raw('CREATE UNIQUE INDEX transaction_attempts_hash ON transaction_attempts (hash) WHERE hash IS NOT NULL');
  await knex.raw(`
    CREATE TABLE send_queues (
      chain_id bigint NOT NULL,
      address text NOT NULL,
      next_nonce numeric(20, 0) NOT NULL,
      lease_owner text,
      lease_until timestamptz,
      PRIMARY KEY (chain_id, address)
    )`);
  await knex.raw('ALTER TABLE wallet_signatures ADD COLUMN cost numeric(78, 0)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE wallet_signatures DROP COLUMN cost');
  await knex.raw('DROP TABLE send_queues');
  await knex.raw('DROP TABLE transaction_attempts');
  await knex.raw('DROP TABLE transactions');
}
