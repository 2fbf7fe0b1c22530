import type { Knex } from 'knex';

/**
 * Key identity (docs/interface.md section 5, keyvault/README.md): the deployment's own random id, which the
 * signer's store is bound to, and a random key id on every wallet row, chosen when the row is
 * inserted and so before the signer is called. Wallets that have a key keep the id it is stored under.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE TABLE deployment (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    singleton boolean NOT NULL DEFAULT true UNIQUE CHECK (singleton),
    created_at timestamptz NOT NULL DEFAULT now()
  )`);
  await knex.raw('INSERT INTO deployment DEFAULT VALUES');
  // A pending row of an earlier release gets a fresh random id: whatever key the old derived id
  // may have reached is never handed out.
  await knex.raw(`UPDATE wallets SET key_id = gen_random_uuid()::text WHERE address IS NULL`);
  await knex.raw(`ALTER TABLE wallets ALTER COLUMN key_id SET DEFAULT gen_random_uuid()::text, ALTER COLUMN key_id SET NOT NULL`);
  await knex.raw(`CREATE UNIQUE INDEX wallets_key_id ON wallets (key_id)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX wallets_key_id');
  await knex.raw(`ALTER TABLE wallets ALTER COLUMN key_id DROP DEFAULT, ALTER COLUMN key_id DROP NOT NULL`);
  await knex.raw(`UPDATE wallets SET key_id = NULL WHERE address IS NULL`);
  await knex.raw('DROP TABLE deployment');
}
