/**
 * The folder of src/ that owns each table of the database: the only one whose code names the
 * table in SQL (a knex builder, or a statement's text). Other folders call the owner's functions,
 * or compose a statement from an SQL fragment the owner exports (a function returning a condition
 * or a subquery), so one statement can still span domains. test/platform/db/owners.test.ts holds the rule
 * and fails on a table of the schema missing here.
 */
export const TABLE_OWNERS = {
  organisations: 'organisations',
  projects: 'projects',
  project_keys: 'projects',
  api_tokens: 'tokens',
  wallets: 'wallets',
  memberships: 'memberships',
  membership_transactions: 'memberships',
  webhook_subscriptions: 'webhooks',
  audit_log: 'audit',
  outbox: 'outbox',
  wallet_signatures: 'policies',
  idempotency_keys: 'idempotency',
  rate_limits: 'ratelimit',
  signer_carry_over: 'signer',
  deployment: 'db',
  knex_migrations: 'db',
  knex_migrations_lock: 'db',
} as const;

export type Table = keyof typeof TABLE_OWNERS;

/**
 * Tables another folder reads too, and why. src/tenancy/ decides who reaches which organisation
 * and project, in one statement on the request's hot path (visible.ts: the visible rows;
 * project-key.ts: a project key's live project; quiet.ts: the quiet-tenant condition), so it
 * reads these tables; their owners alone write them.
 */
export const ALSO_READ_BY: Readonly<Partial<Record<Table, readonly string[]>>> = {
  organisations: ['tenancy'],
  projects: ['tenancy'],
  project_keys: ['tenancy'],
};
