import type { Knex } from 'knex';

/**
 * The audit log as a hash chain (docs/audit.md): writers insert rows as before (seq null); one
 * sealer gives each committed row its place (`seq`) and `hash = SHA-256(prev_hash ‖ canonical row)`.
 * Checkpoints are the chain's size and head, signed by the service key.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('audit_log', (t) => {
    t.bigInteger('seq');
    t.binary('prev_hash');
    t.binary('hash');
  });
  await knex.raw('CREATE UNIQUE INDEX audit_log_seq ON audit_log (seq) WHERE seq IS NOT NULL');
  // What the sealer reads: the rows not sealed yet, few at any time.
  await knex.raw('CREATE INDEX audit_log_unsealed ON audit_log (id) WHERE seq IS NULL');
  // An organisation's export, in chain order.
  await knex.raw('CREATE INDEX audit_log_organisation_seq ON audit_log (organisation_id, seq) WHERE seq IS NOT NULL');
  await knex.schema.createTable('audit_checkpoints', (t) => {
    // The chain's size when signed: rows 1..size.
    t.bigInteger('size').primary();
    t.binary('head').notNullable();
    t.timestamp('at', { useTz: true }).notNullable();
    t.text('kid').notNullable();
    // The compact JWS of { size, head, time } by the service key.
    t.text('jws').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('audit_checkpoints');
  await knex.raw('DROP INDEX audit_log_organisation_seq');
  await knex.raw('DROP INDEX audit_log_unsealed');
  await knex.raw('DROP INDEX audit_log_seq');
  await knex.schema.alterTable('audit_log', (t) => {
    t.dropColumn('hash');
    t.dropColumn('prev_hash');
    t.dropColumn('seq');
  });
}
