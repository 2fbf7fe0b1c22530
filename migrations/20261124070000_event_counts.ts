import type { Knex } from 'knex';

/**
 * A recorded change's number of events, written with it, so that leasing it for the fan-out does
 * not parse its payload to count them (`json_array_length` of a 1,000-item issue's 1.4 MB took
 * 8 ms of the database's CPU at every lease). And payloads compressed with lz4 where the server
 * has it (PostgreSQL 14+ built with it, as Debian's and the official images are): pglz spent
 * about 8 ms more on each such payload. Existing values keep their compression.
 */
async function hasLz4(knex: Knex): Promise<boolean> {
  const { rows } = await knex.raw<{ rows: Array<{ lz4: boolean }> }>(
    `SELECT coalesce((SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'), false) AS lz4`,
  );
  return rows[0]?.lz4 === true;
}

export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE outbox ADD COLUMN event_count integer');
  await knex.raw(`UPDATE outbox SET event_count = json_array_length(payload::json) WHERE kind = 'event' AND status = 'pending'`);
  if (await hasLz4(knex)) await knex.raw('ALTER TABLE outbox ALTER COLUMN payload SET COMPRESSION lz4');
}

export async function down(knex: Knex): Promise<void> {
  if (await hasLz4(knex)) await knex.raw('ALTER TABLE outbox ALTER COLUMN payload SET COMPRESSION default');
  await knex.raw('ALTER TABLE outbox DROP COLUMN event_count');
}
