import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * Writes BENCHMARKS.md at the top level: one table with every benchmark of the project, built
 * from the newest result file of each (`bench/results/<name>-<timestamp>.json`). `npm run bench`
 * runs every benchmark, then this.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const RESULTS = `${ROOT}bench/results/`;

/** A benchmark's result file; rows read the figures they know by dotted path. */
type Result = Record<string, unknown>;

/** The number at a dotted path of a result (NaN when absent, so a broken file shows). */
function num(r: Result, dotted: string): number {
  let v: unknown = r;
  for (const key of dotted.split('.')) v = typeof v === 'object' && v !== null ? (v as Record<string, unknown>)[key] : undefined;
  return typeof v === 'number' ? v : Number.NaN;
}
const str = (r: Result, key: string): string => (typeof r[key] === 'string' ? r[key] : '');

/** A benchmark's result files, oldest first (its variants, `<name>-variant-…`, are not among them). */
function results(name: string): Result[] {
  return readdirSync(RESULTS)
    .filter((f) => f.startsWith(`${name}-`) && /^\d{4}-\d\d-\d\dT/.test(f.slice(name.length + 1)))
    .sort()
    .map((f) => JSON.parse(readFileSync(`${RESULTS}${f}`, 'utf8')) as Result);
}
const newest = (name: string): Result | undefined => results(name).at(-1);

interface Row {
  bench: string;
  what: string;
  figure: string;
  goal: string;
  met: boolean;
  /** Of the runs at the newest run's commit, how many met the goal: one run on a noisy machine is not a result. */
  sameCode: { met: number; runs: number } | undefined;
  at: string;
}

type Figure = Omit<Row, 'bench' | 'at' | 'sameCode'>;
const n = (x: number, digits = 0) => x.toLocaleString('en-GB', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const rows: Row[] = [];
/** The commit a result measured (`code.commit`, written by bench/stats.ts since 2026-11-24), if recorded. */
const commitOf = (r: Result): string | undefined => {
  const c = (r['code'] as { commit?: unknown } | undefined)?.commit;
  return typeof c === 'string' ? c : undefined;
};
/** The newest run's figures, each with how many runs of that commit met its goal. */
const add = (name: string, make: (r: Result) => Figure[]) => {
  const all = results(name);
  const last = all.at(-1);
  if (!last) return;
  const commit = commitOf(last);
  const sameCode = commit === undefined ? undefined : all.filter((r) => commitOf(r) === commit).map(make);
  make(last).forEach((row, i) => {
    const met = sameCode?.filter((figures) => figures[i]?.met === true).length ?? 0;
    rows.push({
      ...row,
      bench: name,
      sameCode: sameCode ? { met, runs: sameCode.length } : undefined,
      at: str(last, 'at').slice(0, 16).replace('T', ' '),
    });
  });
};

add('keyvault', (r) => [
  {
    what: 'keys/s, local store, vs bare key generation',
    figure: `${n(num(r, 'local.perSecond'))} keys/s = ${n(num(r, 'local.ratio'), 2)}×`,
    goal: `≥ ${num(r, 'local.goal')}×`,
    met: num(r, 'local.ratio') >= num(r, 'local.goal'),
  },
  {
    // Since 2026-11-24 its ceiling is a bare client making the same Vault calls (issue 19).
    what:
      typeof (r['vault'] as { ceilingOf?: unknown } | undefined)?.ceilingOf === 'string'
        ? 'keys/s, Vault transit + KV, vs a bare client making the same Vault calls'
        : 'keys/s, Vault transit + KV, vs bare key generation',
    figure: `${n(num(r, 'vault.perSecond'))} keys/s = ${n(num(r, 'vault.ratio'), 2)}×`,
    goal: `≥ ${num(r, 'vault.goal')}×`,
    met: num(r, 'vault.ratio') >= num(r, 'vault.goal'),
  },
]);
add('wallets', (r) => [
  {
    what: 'existing-user signin at saturation vs bare server (default rate limits on)',
    figure: `${n(num(r, 'saturation.service.perSecond'))} req/s = ${n(num(r, 'saturation.ratio'), 2)}×`,
    goal: '≥ 0.65× (issue 18)',
    met: num(r, 'saturation.ratio') >= 0.65,
  },
  ...(Number.isNaN(num(r, 'saturation.compared.serviceOverCompared'))
    ? []
    : [
        {
          what: 'cost of the default rate limits: signin throughput, limits on / off',
          figure: `${n(num(r, 'saturation.compared.serviceOverCompared'), 3)}×`,
          goal: '≥ 0.9×',
          met: num(r, 'saturation.compared.serviceOverCompared') >= 0.9,
        },
      ]),
  {
    what: 'existing-user signin at 200 req/s, p99',
    figure: `${n(num(r, 'existingSignin200.p99Ms'), 1)} ms`,
    goal: '≤ 25 ms',
    met: num(r, 'existingSignin200.p99Ms') <= 25,
  },
  { what: 'new-user signin at 20 req/s, p99', figure: `${n(num(r, 'newSignin20.p99Ms'), 1)} ms`, goal: '≤ 100 ms', met: num(r, 'newSignin20.p99Ms') <= 100 },
  {
    what: 'createasync → webhook at 50 req/s, p99',
    figure: `${n(num(r, 'createasyncToWebhook50.p99Ms'))} ms`,
    goal: '≤ 1,000 ms',
    met: num(r, 'createasyncToWebhook50.p99Ms') <= 1000,
  },
]);
add('memberships', (r) => [
  { what: 'issue 1,000 items in one call, p50', figure: `${n(num(r, 'issue1000.p50Ms'), 1)} ms`, goal: '≤ 150 ms', met: num(r, 'issue1000.p50Ms') <= 150 },
  { what: 'view by wallet, 1M memberships, p99', figure: `${n(num(r, 'viewByWallet.p99Ms'), 2)} ms`, goal: '≤ 10 ms', met: num(r, 'viewByWallet.p99Ms') <= 10 },
]);
add('webhooks', (r) => [
  {
    what: 'deliveries/s, one relay, vs bare loop',
    figure: `${n(num(r, 'relay.perSecond'))}/s = ${n(num(r, 'ratio'), 2)}×`,
    goal: '≥ 0.5×',
    met: num(r, 'ratio') >= 0.5,
  },
  { what: 'commit → receipt at 200 events/s, p99', figure: `${n(num(r, 'steady200.p99Ms'))} ms`, goal: '≤ 250 ms', met: num(r, 'steady200.p99Ms') <= 250 },
]);

const signing = (r: Result, store: 'local' | 'vault', ceiling: string): Figure[] => [
  ...(['personal_sign', 'eth_signTransaction'] as const).map((m) => ({
    what: `${m === 'personal_sign' ? 'personal_sign' : 'type-2 transaction'} signatures/s, server path, ${store} store, vs ${ceiling}`,
    figure: `${n(num(r, `${store}.${m}.perSecond`))}/s = ${n(num(r, `${store}.${m}.ratio`), 2)}×`,
    goal: `≥ ${num(r, `${store}.${m}.goal`)}×`,
    met: num(r, `${store}.${m}.ratio`) >= num(r, `${store}.${m}.goal`),
  })),
  {
    what: `personal_sign at 100/s, ${store} store, p99`,
    figure: `${n(num(r, `${store}.atRate.p99Ms`), 1)} ms`,
    goal: '≤ 15 ms',
    met: num(r, `${store}.atRate.p99Ms`) <= 15,
  },
];
add('signing', (r) => [
  ...signing(r, 'local', 'a bare loop (AES-GCM decrypt, keccak, noble sign)'),
  ...signing(r, 'vault', 'a bare client (transit decrypt, noble sign)'),
]);

/** A share as a signed percentage: +7.6%, −0.4%. */
const pct = (share: number): string => `${share < 0 ? '−' : '+'}${n(Math.abs(share) * 100, 1)}%`;
add('audit', (r) => [
  {
    what: "audited writes at saturation (PUT /api/v1/organisations/:id through the API) with the audit chain's sealer running, vs without it, in alternating rounds",
    figure: `${n(num(r, 'saturation.withoutChainPerSecond'))} → ${n(num(r, 'saturation.withChainPerSecond'))} writes/s: ${pct(num(r, 'saturation.cost'))} (median round ${pct(num(r, 'saturation.medianRoundCost'))}; bare transactions ${pct(num(r, 'leanSaturation.cost'))})`,
    goal: '≤ 10%',
    met: num(r, 'saturation.cost') <= 0.1,
  },
  {
    what: 'sealer lag (commit → sealed in the chain) at a steady 500 audited writes/s',
    figure: `p50 ${n(num(r, 'lag.p50Ms'))} ms, p99 ${n(num(r, 'lag.p99Ms'))} ms, max ${n(num(r, 'lag.maxMs'))} ms`,
    goal: '< 1,000 ms',
    met: num(r, 'lag.maxMs') < 1000,
  },
  {
    what: `verifying a chain of ${n(num(r, 'verify.rows'))} rows from the database (custody audit verify), vs reading them bare`,
    figure: `${n(num(r, 'verify.seconds'), 1)} s (bare read ${n(num(r, 'verify.bareReadSeconds'), 1)} s, ${n(num(r, 'verify.ratio'), 2)}×)`,
    goal: '< 60 s',
    met: num(r, 'verify.seconds') < 60 && num(r, 'verify.rows') >= 1_000_000,
  },
]);

add('console', (r) => [
  {
    what: "the operator console's JavaScript on first load (gzip)",
    figure: `${n(num(r, 'js.gzipBytes') / 1024, 1)} KB`,
    goal: '< 300 KB',
    met: num(r, 'js.gzipBytes') < 300 * 1024,
  },
  {
    what: `console first load until interactive (the failed deliveries page of a project with ${n(num(r, 'failedDeliveries'))}, cold cache), vs a bare static page`,
    figure: `p50 ${n(num(r, 'interactive.p50Ms'))} ms, p95 ${n(num(r, 'interactive.p95Ms'))} ms (bare p50 ${n(num(r, 'bare.p50Ms'))} ms)`,
    goal: '< 1,000 ms',
    met: num(r, 'interactive.p95Ms') < 1000,
  },
]);

add('transactions', (r) => [
  {
    what: 'sends/s through the service (accepted and broadcast, contiguous nonces), vs a bare sender (noble, eth_sendRawTransaction) on the same anvil',
    figure: `${n(num(r, 'ratio'), 2)}×`,
    goal: '≥ 0.5×',
    met: num(r, 'ratio') >= 0.5,
  },
  {
    what: 'request → broadcast at 50 sends/s, p50 / p99',
    figure: `${n(num(r, 'atRate.broadcastP50Ms'), 1)} / ${n(num(r, 'atRate.broadcastP99Ms'), 1)} ms`,
    goal: '≤ 50 / 250 ms',
    met: num(r, 'atRate.broadcastP50Ms') <= 50 && num(r, 'atRate.broadcastP99Ms') <= 250,
  },
  {
    what: 'request → confirmed at 50 sends/s on automine, p99',
    figure: `${n(num(r, 'atRate.confirmedP99Ms'))} ms`,
    goal: '≤ 1,000 ms',
    met: num(r, 'atRate.confirmedP99Ms') <= 1000,
  },
]);

add('hostile', (r) => {
  const signer = Math.max(num(r, 'worstSignerThroughApi.ms'), num(r, 'worstSignerDirect.ms'));
  return [
    {
      what: "longest event-loop stall: every declared endpoint's dearest body or query (no credentials, a read token, a user's JWT), every method's largest operation, API and signer",
      figure: `API ${n(num(r, 'worstApi.ms'), 1)} ms, signer ${n(signer, 1)} ms (baseline ${n(num(r, 'baselineMs'), 1)} ms)`,
      goal: '≤ 20 ms',
      met: num(r, 'worstApi.ms') <= 20 && signer <= 20,
    },
    {
      what: "another tenant's personal_sign p50 beside 10 maximal operations/s (dry runs and denied signatures), vs alone",
      figure: `${n(num(r, 'otherTenant.besideP50Ms'), 1)} ms vs ${n(num(r, 'otherTenant.aloneP50Ms'), 1)} ms = ${n(num(r, 'otherTenant.ratio'), 2)}×`,
      goal: '≤ 2×',
      met: num(r, 'otherTenant.ratio') <= 2,
    },
  ];
});

add('fairness', (r) => [
  {
    what: `a tenant's createasync → webhook p99 beside a tenant with dead endpoints and 1,000-item issues, vs alone`,
    figure: `${n(num(r, 'beside.p99Ms'))} ms vs ${n(num(r, 'alone.p99Ms'))} ms = ${n(num(r, 'ratio'), 1)}×`,
    goal: `≤ ${num(r, 'goal')}×`,
    met: num(r, 'ratio') <= num(r, 'goal'),
  },
]);

add('signer-memory', (r) => [
  {
    what: `signer peak memory, ${num(r, 'concurrency')} concurrent key creations (Vault, chart settings), vs the chart's limit`,
    figure: `${n(num(r, 'peakMiB'), 1)} MiB = ${n(num(r, 'ratio') * 100, 1)}% of ${n(num(r, 'limitMiB'))} MiB`,
    goal: '< 70%',
    met: num(r, 'ratio') < 0.7,
  },
]);

const machine = (() => {
  const any = newest('webhooks') ?? newest('memberships') ?? newest('wallets') ?? newest('keyvault');
  const m = (any?.['machine'] ?? {}) as Record<string, unknown>;
  return any ? `${String(m['cpus'])} vCPU ${String(m['cpu'])}, Node ${String(m['node'])}` : 'unknown';
})();

const md = `# Benchmarks

Generated by \`npm run bench\` (every benchmark, then \`scripts/benchmarks-md.ts\`) from the newest
result file of each benchmark in \`bench/results/\`, with how many runs of the same commit met
each goal (variants, \`<name>-variant-…\`, are not counted; older files did not record their commit). How each is measured, and the history of
its figures, is in [bench/README.md](bench/README.md). Machine: ${machine}; these machines are
noisy (±25% between runs), so ratios are taken against a ceiling measured in the same run.

| Benchmark | Run with | What | Figure | Goal | Met | Runs of that commit meeting it | Measured (UTC) |
|---|---|---|---|---|---|---|---|
${rows.map((r) => `| ${r.bench} | \`npm run bench:${r.bench}\` | ${r.what} | ${r.figure} | ${r.goal} | ${r.met ? 'yes' : 'no'} | ${r.sameCode ? `${r.sameCode.met} of ${r.sameCode.runs}` : 'not recorded'} | ${r.at} |`).join('\n')}

## Fault tests

Run by \`npm test\` (and so by CI); the three of \`test/faults.test.ts\` on embedded PostgreSQL
clusters of their own (never the machine's), the others on throwaway databases:

| Fault | Outcome asserted | Suite |
|---|---|---|
| PostgreSQL (an embedded cluster) stopped and started again while four clients issue memberships | only 201 and 503 answers, every 503 with \`Retry-After\`; the service recovers by itself; every change answered 201 is there with its ledger row and its event | \`test/faults.test.ts\` |
| \`ROLE=all\` killed with SIGKILL during 200 \`createasync\` | every accepted request ends with exactly one wallet and one delivered webhook; signer keys = wallet addresses | \`test/crash.test.ts\` |
| the signer (its own process) killed with SIGKILL while four clients sign new users in and call \`createasync\`, then started again | only 200, 202 and 503 answers, every 503 with \`Retry-After\`; every wallet answered is stored with that address and the signer holds its key; every accepted \`createasync\` ends with a wallet | \`test/faults.test.ts\` |
| \`ROLE=all\` killed with SIGKILL while four clients issue memberships to a project with a webhook subscription and a fifth calls \`createasync\`, then started again | every membership answered 201 is there once with one \`membership.issued\` event; every such event reaches the subscription, each with one \`webhook-id\`; every accepted \`createasync\` ends with exactly one wallet | \`test/faults.test.ts\` |
| a worker killed mid-delivery (a retry row, and an event sent straight from its record) | the delivery is sent again with the same \`webhook-id\` | \`test/domains/webhooks/workers.test.ts\` |
| a webhook endpoint that never answers, beside a healthy one | every delivery to the healthy one arrives while the attempts to the other are open | \`test/domains/webhooks/workers.test.ts\` |
| receivers that trickle bytes, answer 10 MiB, redirect to the metadata address | \`timeout\`; read to 16 KiB, \`http_status\`; not followed, \`http_status\` | \`test/domains/webhooks/webhooks.test.ts\` |
| Vault sealed | retryable \`vault_sealed\`, key creation answers \`503\` with \`Retry-After\`; the signer and the API stay ready (\`keyStore: sealed\`), known users sign in | \`test/keyvault/signer-vault.test.ts\` |
| 10,000 fuzzed requests over every endpoint | never a 5xx, problem+json on every 4xx, no change on a 4xx | \`test/fuzz.test.ts\` |
`;
writeFileSync(`${ROOT}BENCHMARKS.md`, md);
process.stdout.write(`BENCHMARKS.md: ${rows.length} figures\n`);
