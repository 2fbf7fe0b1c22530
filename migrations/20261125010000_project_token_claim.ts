import type { Knex } from 'knex';

/**
 * A claim a project may require of its users' JWTs (name and value, e.g. `azp` = the customer's
 * client id): what binds a token to the project when organisations share an issuer. The issuer
 * index serves the rule that checks who else trusts an issuer (projects/issuer-binding.ts).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE projects ADD COLUMN token_claim_name text, ADD COLUMN token_claim_value text');
  await knex.raw('ALTER TABLE projects ADD CONSTRAINT projects_token_claim_pair CHECK ((token_claim_name IS NULL) = (token_claim_value IS NULL))');
  await knex.raw('CREATE INDEX projects_issuer ON projects (issuer)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX projects_issuer');
  await knex.raw('ALTER TABLE projects DROP CONSTRAINT projects_token_claim_pair');
  await knex.raw('ALTER TABLE projects DROP COLUMN token_claim_name, DROP COLUMN token_claim_value');
}
