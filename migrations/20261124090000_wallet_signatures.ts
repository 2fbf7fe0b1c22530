import type { Knex } from 'knex';

/**
 * The signatures counted by a policy's rolling-window `limits` (docs/signing.md): one row per signature
 * made (a reservation taken before the signer is asked, removed when it does not sign). Kept 30
 * days, the longest window.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE wallet_signatures (
      id bigserial PRIMARY KEY,
      project_id bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      wallet_id bigint NOT NULL REFERENCES wallets(id) ON DELETE CASCADE,
      method text NOT NULL,
      created_at timestamptz NOT NULL
    )`);
  await knex.raw('CREATE INDEX wallet_signatures_project ON wallet_signatures (project_id, method, created_at)');
  await knex.raw('CREATE INDEX wallet_signatures_wallet ON wallet_signatures (wallet_id, method, created_at)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE wallet_signatures');
}
