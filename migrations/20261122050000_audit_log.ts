import type { Knex } from 'knex';

/** Who did what, when, under which request id: every management write and every key creation. */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('audit_log', (t) => {
    t.bigIncrements('id');
    t.timestamp('at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    // Null for what belongs to no organisation (an organisation not created after all cannot be; operator-wide actions can).
    t.bigInteger('organisation_id');
    t.bigInteger('project_id');
    // `operator`, `token:<id>`, or `project:<id>` for key creations through a project key.
    t.text('actor').notNullable();
    // `<METHOD> <route pattern>`, or `wallet.key_created`.
    t.text('action').notNullable();
    t.text('target');
    t.integer('status');
    t.text('request_id');
    // Ids only: path parameters, `projectId`; never bodies, headers or answers.
    t.jsonb('details').notNullable().defaultTo('{}');
    t.index(['organisation_id', 'id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('audit_log');
}
