import pg from 'pg';

/**
 * Bulk-seeds `count` memberships into one project for the membership benchmark: `perWallet`
 * memberships (types `seed:0`, `seed:1`, …) for each of `count / perWallet` wallets, in one
 * INSERT … SELECT over generate_series (no round trip per row), then ANALYZE.
 * Seeded addresses are lower-case hex (EIP-55 needs keccak-256, which SQL lacks); the view
 * matches on the lower-case form either way. `seedWallets` gives the addresses back.
 *
 *   node dist/scripts/seed-memberships.js <DATABASE_URL> <projectId> [count=1000000] [perWallet=5]
 */
export async function seedMemberships(databaseUrl: string, projectId: number, count: number, perWallet = 5): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(
      `INSERT INTO memberships (project_id, membership_type, wallet_address, wallet_lower, expiration, transferable, holds_slot, issued_at, updated_at)
       SELECT $1, 'seed:' || (i % $3), w, w, 0, (i % 2 = 0), true, now(), now()
         FROM generate_series(0, $2 - 1) AS i,
              LATERAL (SELECT '0x' || md5('wallet' || (i / $3)) || substr(md5('wallet2' || (i / $3)), 1, 8) AS w) AS a`,
      [projectId, count, perWallet],
    );
    await client.query('ANALYZE memberships');
  } finally {
    await client.end();
  }
}

/** The addresses of seeded wallets `ns`, as the seed computes them. */
export async function seedWallets(client: pg.Client, ns: number[]): Promise<string[]> {
  const { rows } = await client.query<{ w: string }>(
    `SELECT '0x' || md5('wallet' || n) || substr(md5('wallet2' || n), 1, 8) AS w FROM unnest($1::bigint[]) WITH ORDINALITY AS t(n, ord) ORDER BY ord`,
    [ns],
  );
  return rows.map((r) => r.w);
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  const [url, project, count, perWallet] = process.argv.slice(2);
  if (!url || !project) {
    process.stderr.write('usage: node dist/scripts/seed-memberships.js <DATABASE_URL> <projectId> [count] [perWallet]\n');
    process.exit(2);
  }
  await seedMemberships(url, Number(project), Number(count ?? 1_000_000), Number(perWallet ?? 5));
  process.stdout.write('seeded\n');
}
