import type { Knex } from 'knex';

/**
 * The development identity provider's signing key (testnet only): one row, the private key sealed
 * under the data encryption key, so every API process of a deployment signs and verifies with the
 * same key.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE TABLE dev_idp_key (
    id smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    kid text NOT NULL,
    public_jwk jsonb NOT NULL,
    private_key_sealed text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
  )`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE dev_idp_key');
}
