import type { Knex } from 'knex';

const UPPER = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';
const LOWER = 'abcdefghijklmnopqrstuvwxyz';

/**
 * Identity folding becomes ASCII-only (docs/interface.md section 5): `email_lower` is recomputed with
 * A-Z → a-z and nothing else. Two rows that would then share a key stop the migration with a
 * report (nothing is changed); rows whose key changes (an address whose non-ASCII letters full
 * Unicode case mapping had folded) are listed on stderr for the operator to review.
 */
export async function up(knex: Knex): Promise<void> {
  const fold = `translate(email, '${UPPER}', '${LOWER}')`;
  const { rows: collisions } = await knex.raw<{ rows: Array<{ project_id: string; key: string; ids: string[] }> }>(
    `SELECT project_id, ${fold} AS key, array_agg(id ORDER BY id) AS ids FROM wallets GROUP BY project_id, ${fold} HAVING count(*) > 1`,
  );
  if (collisions.length > 0) {
    const list = collisions.map((c) => `project ${c.project_id}: wallets ${c.ids.join(', ')}`).join('; ');
    throw new Error(`ASCII identity folding would merge wallets (${list}); nothing was changed. Resolve these rows by hand, then migrate again.`);
  }
  const { rows: changed } = await knex.raw<{ rows: Array<{ id: string; project_id: string }> }>(
    `UPDATE wallets SET email_lower = ${fold} WHERE email_lower IS DISTINCT FROM ${fold} RETURNING id, project_id`,
  );
  if (changed.length > 0) {
    process.stderr.write(
      `identity folding: ${changed.length} wallet(s) had an identity key folded beyond ASCII and now match only their exact address: ` +
        `${changed.map((r) => `wallet ${r.id} (project ${r.project_id})`).join(', ')}. Review them: a sign-in may have reached one with a look-alike address.\n`,
    );
  }
}

/** Earlier releases folded with lower(); rows keep the ASCII key, which that release also matches for ASCII addresses. */
export async function down(): Promise<void> {}
