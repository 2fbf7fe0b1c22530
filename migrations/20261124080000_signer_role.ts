import type { Knex } from 'knex';

/**
 * API tokens of the `signer` role (docs/signing.md): a customer's backend that asks wallets to sign.
 * Project-scoped; may sign and read, may not manage; `admin` does not imply it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_check');
  await knex.raw(`ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_role_check CHECK (role IN ('admin', 'read', 'signer'))`);
  await knex.raw(`ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_signer_project CHECK (role <> 'signer' OR project_id IS NOT NULL)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_signer_project');
  await knex.raw('ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_check');
  await knex.raw(`ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_role_check CHECK (role IN ('admin', 'read'))`);
}
