import type { Knex } from 'knex';

/**
 * Memberships (docs/interface.md section 7) and their ledger of transactions.
 *
 * `holds_slot` is true while a membership occupies its (wallet, type) place; a partial unique
 * index makes "one active membership per wallet and type" a constraint, not a hope. Revocation
 * frees the place at once; an expired membership frees it when the next issue or transfer for
 * that wallet and type needs it (expiry itself is computed from the clock, never written).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('memberships', (t) => {
    // The id is the tokenId: a deployment-wide sequence, so unique per project too.
    t.bigIncrements('id');
    t.bigInteger('project_id').notNullable().references('projects.id');
    t.text('membership_type').notNullable();
    // EIP-55 as returned; `wallet_lower` is what filters and the uniqueness rule compare.
    t.text('wallet_address').notNullable();
    t.text('wallet_lower').notNullable();
    // Unix seconds; 0 = never expires.
    t.bigInteger('expiration').notNullable().defaultTo(0);
    t.boolean('transferable').notNullable().defaultTo(false);
    t.boolean('holds_slot');
    t.timestamp('issued_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('revoked_at', { useTz: true });
    // Set by the scheduler in the transaction that records `membership.expired` (once per membership).
    t.timestamp('expired_notified_at', { useTz: true });
  });
  await knex.raw(`ALTER TABLE memberships ADD CONSTRAINT memberships_slot_check CHECK (holds_slot IS NULL OR holds_slot)`);
  await knex.raw(`CREATE UNIQUE INDEX memberships_one_active ON memberships (project_id, wallet_lower, membership_type) WHERE holds_slot`);
  // View by wallet and by type, in id order (section 10).
  await knex.raw(`CREATE INDEX memberships_by_wallet ON memberships (project_id, wallet_lower, id)`);
  await knex.raw(`CREATE INDEX memberships_by_type ON memberships (project_id, membership_type, id)`);
  await knex.raw(`CREATE INDEX memberships_by_project ON memberships (project_id, id)`);
  // What the expiry scheduler looks for.
  await knex.raw(`CREATE INDEX memberships_expiry_due ON memberships (expiration) WHERE expiration > 0 AND revoked_at IS NULL AND expired_notified_at IS NULL`);

  await knex.schema.createTable('membership_transactions', (t) => {
    t.bigIncrements('id');
    t.bigInteger('project_id').notNullable().references('projects.id');
    t.text('type').notNullable();
    // No foreign key: a hard delete removes the membership, never its history.
    t.bigInteger('token_id').notNullable();
    t.text('membership_type').notNullable();
    t.text('from_address');
    t.text('to_address');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['project_id', 'token_id', 'id']);
  });
  await knex.raw(
    `ALTER TABLE membership_transactions ADD CONSTRAINT membership_transactions_type_check CHECK (type IN ('mint', 'update', 'transfer', 'burn', 'delete'))`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('membership_transactions');
  await knex.schema.dropTable('memberships');
}
