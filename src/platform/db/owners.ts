/**
 * The folder of src/ that owns each table of the database: the only one whose code names the
 * table in SQL (a knex builder, or a statement's text). Other folders call the owner's functions,
 * or compose a statement from an SQL fragment the owner exports (a function returning a condition
 * or a subquery), so one statement can still span domains. test/platform/db/owners.test.ts holds the rule
 * and fails on a table of the schema missing here.
 */
export const TABLE_OWNERS = {
  organisations: 'domains/organisations',
  projects: 'domains/projects',
  project_keys: 'domains/projects',
  api_tokens: 'domains/tokens',
  wallets: 'domains/wallets',
  memberships: 'domains/memberships',
  membership_transactions: 'domains/memberships',
  webhook_subscriptions: 'domains/webhooks',
  webhook_stream_cursors: 'domains/webhooks',
  audit_log: 'domains/audit',
  audit_checkpoints: 'domains/audit',
  audit_chain: 'domains/audit',
  audit_chain_state: 'domains/audit',
  outbox: 'platform/outbox',
  wallet_signatures: 'domains/signing',
  transactions: 'domains/transactions',
  transaction_attempts: 'domains/transactions',
  send_queues: 'domains/transactions',
  idempotency_keys: 'platform/idempotency',
  rate_limits: 'platform/ratelimit',
  // The API's start-up carry-over of an earlier release's signer documents (programs/carry-over.ts).
  signer_carry_over: 'programs',
  // The development identity provider's key (testnet): access/auth/dev-idp.ts.
  dev_idp_key: 'access/auth',
  // The operator console's sessions, an API token exchanged for a cookie: access/auth/session.ts.
  console_sessions: 'access/auth',
  deployment: 'platform/db',
  knex_migrations: 'platform/db',
  knex_migrations_lock: 'platform/db',
} as const;

export type Table = keyof typeof TABLE_OWNERS;

/**
 * Tables another folder reads too, and why. src/access/tenancy/ decides who reaches which organisation
 * and project, in one statement on the request's hot path (visible.ts: the visible rows;
 * project-key.ts: a project key's live project; quiet.ts: the quiet-tenant condition), so it
 * reads these tables; their owners alone write them.
 */
export const ALSO_READ_BY: Readonly<Partial<Record<Table, readonly string[]>>> = {
  organisations: ['access/tenancy'],
  projects: ['access/tenancy'],
  project_keys: ['access/tenancy'],
};
