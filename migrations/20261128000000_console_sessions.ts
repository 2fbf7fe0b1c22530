import type { Knex } from 'knex';

/**
 * Console sessions (access/auth/session.ts): an API token exchanged for a cookie. The table holds the
 * SHA-256 of the session secret and of the token it stands for, never either in clear; a session is
 * live while the token is (the token's hash is looked up again on every request), until it expires;
 * sign-out deletes it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE TABLE console_sessions (
    id bigserial PRIMARY KEY,
    session_hash bytea NOT NULL UNIQUE,
    token_hash bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
  )`);
  await knex.raw('CREATE INDEX console_sessions_expires ON console_sessions (expires_at)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE console_sessions');
}
