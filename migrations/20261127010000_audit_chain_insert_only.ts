import type { Knex } from 'knex';

/**
 * The audit chain in an insert-only table of its own (docs/audit.md, docs/decisions.md): the sealer
 * inserts one narrow `audit_chain` row per audit row instead of updating the wide `audit_log` row
 * (a new heap tuple, an entry in every index and a full row image in the WAL each). It finds the
 * rows to seal by the writer's transaction id (`audit_log.xid`, set by default), from a floor below
 * which every transaction has ended and its rows are sealed (`audit_chain_state`).
 */
export async function up(knex: Knex): Promise<void> {
  // A constant default is stored once, without rewriting the table: the rows there now read 0
  // (they are sealed, or given the floor below); new rows get their transaction's id.
  await knex.raw(`ALTER TABLE audit_log ADD COLUMN xid xid8 NOT NULL DEFAULT '0'`);
  await knex.raw('ALTER TABLE audit_log ALTER COLUMN xid SET DEFAULT pg_current_xact_id()');
  // No foreign key to audit_log: its check would lock each audit row (FOR KEY SHARE) and so write
  // to it again, the cost this table removes; a chain entry pointing nowhere is what verification reports.
  await knex.raw(`CREATE TABLE audit_chain (
    seq bigint PRIMARY KEY,
    audit_id bigint NOT NULL UNIQUE,
    organisation_id bigint,
    prev_hash bytea NOT NULL,
    hash bytea NOT NULL
  )`);
  // An organisation's export, in chain order (organisation_id is the audit row's, copied when sealed).
  await knex.raw('CREATE INDEX audit_chain_organisation_seq ON audit_chain (organisation_id, seq)');
  await knex.raw(
    'INSERT INTO audit_chain (seq, audit_id, organisation_id, prev_hash, hash) SELECT seq, id, organisation_id, prev_hash, hash FROM audit_log WHERE seq IS NOT NULL',
  );
  await knex.raw(`CREATE TABLE audit_chain_state (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    xid_floor xid8 NOT NULL
  )`);
  // The ALTER above holds audit_log's exclusive lock until this commits, so every other writer of
  // audit_log either committed before it (its rows are visible now) or is still running and so at
  // or above this snapshot's xmin (its rows, inserted after this commits, carry its xid).
  await knex.raw('INSERT INTO audit_chain_state (xid_floor) SELECT pg_snapshot_xmin(pg_current_snapshot())');
  // Rows not sealed yet are found from the floor.
  await knex.raw('UPDATE audit_log SET xid = (SELECT xid_floor FROM audit_chain_state) WHERE seq IS NULL');
  await knex.raw('CREATE INDEX audit_log_xid ON audit_log (xid)');
  await knex.raw('DROP INDEX audit_log_organisation_seq');
  await knex.raw('DROP INDEX audit_log_unsealed');
  await knex.raw('DROP INDEX audit_log_seq');
  await knex.raw('ALTER TABLE audit_log DROP COLUMN hash, DROP COLUMN prev_hash, DROP COLUMN seq');
}

/** Back to the chain fields on audit_log (a chain entry whose audit row is gone has no place there and is lost). */
export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE audit_log ADD COLUMN seq bigint, ADD COLUMN prev_hash bytea, ADD COLUMN hash bytea');
  await knex.raw('UPDATE audit_log a SET seq = c.seq, prev_hash = c.prev_hash, hash = c.hash FROM audit_chain c WHERE c.audit_id = a.id');
  await knex.raw('CREATE UNIQUE INDEX audit_log_seq ON audit_log (seq) WHERE seq IS NOT NULL');
  await knex.raw('CREATE INDEX audit_log_unsealed ON audit_log (id) WHERE seq IS NULL');
  await knex.raw('CREATE INDEX audit_log_organisation_seq ON audit_log (organisation_id, seq) WHERE seq IS NOT NULL');
  await knex.raw('DROP TABLE audit_chain_state');
  await knex.raw('DROP TABLE audit_chain');
  await knex.raw('DROP INDEX audit_log_xid');
  await knex.raw('ALTER TABLE audit_log DROP COLUMN xid');
}
