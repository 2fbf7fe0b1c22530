import type { Knex } from 'knex';

/** Organisations, projects with their keys, API tokens and stored idempotent responses. */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('organisations', (t) => {
    t.bigIncrements('id');
    t.text('name').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('deleted_at', { useTz: true });
  });

  await knex.schema.createTable('projects', (t) => {
    t.bigIncrements('id');
    t.bigInteger('organisation_id').notNullable().references('organisations.id');
    t.text('name').notNullable();
    t.text('environment').notNullable();
    t.text('issuer').notNullable();
    t.text('wallet_webhook_url');
    // AES-256-GCM under DATA_ENCRYPTION_KEY; the previous secret stays valid until it expires.
    t.text('wallet_webhook_secret_enc').notNullable();
    t.text('wallet_webhook_secret_prev_enc');
    t.timestamp('wallet_webhook_secret_prev_expires_at', { useTz: true });
    t.boolean('require_verified_email').notNullable().defaultTo(true);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('deleted_at', { useTz: true });
    t.index(['organisation_id', 'id']);
  });
  await knex.raw(`ALTER TABLE projects ADD CONSTRAINT projects_environment_check CHECK (environment IN ('testnet', 'production'))`);

  await knex.schema.createTable('project_keys', (t) => {
    t.bigIncrements('id');
    t.bigInteger('project_id').notNullable().references('projects.id');
    // SHA-256 of the whole key; the key itself is shown once and never stored.
    t.binary('key_hash').notNullable().unique();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    // Null while current; set by a rotation to the end of the grace period.
    t.timestamp('expires_at', { useTz: true });
    t.index(['project_id']);
  });

  await knex.schema.createTable('api_tokens', (t) => {
    t.bigIncrements('id');
    t.bigInteger('organisation_id').notNullable().references('organisations.id');
    t.bigInteger('project_id').references('projects.id');
    t.text('name').notNullable();
    t.text('role').notNullable();
    t.binary('token_hash').notNullable().unique();
    t.text('created_by').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('revoked_at', { useTz: true });
    t.index(['organisation_id', 'id']);
  });
  await knex.raw(`ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_role_check CHECK (role IN ('admin', 'read'))`);

  await knex.schema.createTable('idempotency_keys', (t) => {
    t.text('principal').notNullable();
    t.text('key').notNullable();
    t.text('fingerprint').notNullable();
    t.integer('response_status');
    t.text('response_content_type');
    t.text('response_body');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.primary(['principal', 'key']);
    t.index(['expires_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('idempotency_keys');
  await knex.schema.dropTable('api_tokens');
  await knex.schema.dropTable('project_keys');
  await knex.schema.dropTable('projects');
  await knex.schema.dropTable('organisations');
}
