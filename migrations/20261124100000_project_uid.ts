import type { Knex } from 'knex';

/**
 * Every project gets a random identity, `uid`, which is what the signer knows it by (its policy,
 * its policy owners, its keys): the numeric id comes from a sequence, which hands an id out again
 * after a database restore, and with it another customer's documents. Existing rows get one here,
 * new rows at insert; it never changes.
 *
 * `signer_carry_over` lists what the signer kept under the numeric ids of earlier releases, to be
 * carried over to the identities by the API at its start (src/signer/carry-over.ts): each
 * project's documents (a row without wallet), and each wallet's key, bound from this database's
 * records rather than by whichever project signs with it first. Only rows that exist now are
 * listed: a project made after this migration has nothing under its numeric id that is its own.
 */
export async function up(knex: Knex): Promise<void> {
  // A volatile default: PostgreSQL rewrites the table and draws one per existing row.
  await knex.raw('ALTER TABLE projects ADD COLUMN uid uuid NOT NULL DEFAULT gen_random_uuid()');
  await knex.raw('ALTER TABLE projects ADD CONSTRAINT projects_uid UNIQUE (uid)');
  await knex.raw(`CREATE FUNCTION projects_uid_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.uid IS DISTINCT FROM OLD.uid THEN
        RAISE EXCEPTION 'the uid of project % never changes', OLD.id;
      END IF;
      RETURN NEW;
    END $$`);
  await knex.raw('CREATE TRIGGER projects_uid_fixed BEFORE UPDATE OF uid ON projects FOR EACH ROW EXECUTE FUNCTION projects_uid_fixed()');

  await knex.raw(`CREATE TABLE signer_carry_over (
    id bigserial PRIMARY KEY,
    project_id bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    wallet_id bigint REFERENCES wallets(id) ON DELETE CASCADE,
    refused text
  )`);
  // Documents first (ids order them), then keys project by project.
  await knex.raw('INSERT INTO signer_carry_over (project_id) SELECT id FROM projects ORDER BY id');
  await knex.raw('INSERT INTO signer_carry_over (project_id, wallet_id) SELECT project_id, id FROM wallets ORDER BY project_id, id');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE signer_carry_over');
  await knex.raw('DROP TRIGGER projects_uid_fixed ON projects');
  await knex.raw('DROP FUNCTION projects_uid_fixed()');
  await knex.raw('ALTER TABLE projects DROP COLUMN uid');
}
