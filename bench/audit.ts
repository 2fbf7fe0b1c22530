import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { readChain } from '../src/domains/audit/commands.js';
import { auditInsert } from '../src/domains/audit/record.js';
import { chainHead, sealedRows, unsealedCount } from '../src/domains/audit/repository.js';
import { sealAuditLog } from '../src/domains/audit/seal.js';
import { createDb } from '../src/platform/db/knex.js';
import { migrateLatest } from '../src/platform/db/migrate.js';
import { adminQuery, databaseUrlFor } from '../test/support/db.js';
import { percentile, writeResult } from './stats.js';
import { randomBytes } from 'node:crypto';
import { freePort, spawnService } from '../test/support/process.js';
import { startSigner } from '../test/support/signer.js';
import { until } from '../test/support/wait.js';

/**
 * The audit chain's cost (issue 34, docs/audit.md):
 * 1. audited writes at saturation, CONCURRENCY at a time, with the sealer running in its own process
 *    at its default interval, against the same writes with no sealer, in alternating rounds of the
 *    same run: the service's management writes through the API (the goal), then the leanest audited
 *    write (an update and its audit row in one transaction, no HTTP: the worst case);
 * 2. the sealer's lag (commit → sealed) at a steady 500 audited writes/s;
 * 3. verifying a chain of ROWS (1,000,000) rows from the database, against reading the same rows bare.
 */
const CONCURRENCY = Number(process.env['BENCH_CONCURRENCY'] ?? 16);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 8);
const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 4);
const RATE = Number(process.env['BENCH_RATE'] ?? 500);
const LAG_SECONDS = Number(process.env['BENCH_LAG_SECONDS'] ?? 10);
const ROWS = Number(process.env['BENCH_ROWS'] ?? 1_000_000);
const SEAL_INTERVAL_MS = Number(process.env['AUDIT_SEAL_INTERVAL_MS'] ?? 500);

const name = `custody_bench_audit_${Date.now()}`;
await adminQuery(`CREATE DATABASE ${name}`);
const url = databaseUrlFor(name);
const db = createDb({ url, poolMax: CONCURRENCY + 2 });

/** One audited write: the change and its audit entry commit together, as the audit middleware writes them. */
async function auditedWrite(orgId: number, i: number): Promise<number> {
  return db.transaction(async (tx) => {
    await tx('organisations')
      .where('id', orgId)
      .update({ name: `bench ${i}` });
    const [row] = await auditInsert(tx, {
      organisation_id: orgId,
      project_id: null,
      actor: 'operator',
      action: 'PUT /api/v1/organisations/:id',
      target: String(orgId),
      status: 200,
      request_id: `bench-${i}`,
      details: { params: { id: String(orgId) } },
    }).returning<Array<{ id: number }>>('id');
    return row?.id ?? 0;
  });
}

/** The machine's CPU seconds spent so far (every process, this one, the sealer and PostgreSQL included; steal time not). */
function cpuSpent(): number {
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0] = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '')
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  return (user + nice + system + irq + softirq) / 100;
}

/** Writes at saturation for `seconds`: writes per second, and the machine's CPU milliseconds per write. */
async function saturate(
  orgs: number[],
  seconds: number,
  write: (org: number, i: number) => Promise<unknown> = auditedWrite,
): Promise<{ perSecond: number; cpuMsPerWrite: number; writes: number }> {
  let done = 0;
  const cpu = cpuSpent();
  const until = Date.now() + seconds * 1000;
  await Promise.all(
    orgs.map(async (org) => {
      while (Date.now() < until) await write(org, done++);
    }),
  );
  return { perSecond: done / seconds, cpuMsPerWrite: ((cpuSpent() - cpu) * 1000) / done, writes: done };
}

/** The server's WAL position (every database's writes; the machine's other work shows up in it too). */
async function walLsn(): Promise<string> {
  const { rows } = await db.raw<{ rows: Array<{ lsn: string }> }>('SELECT pg_current_wal_lsn()::text AS lsn');
  return rows[0]?.lsn ?? '0/0';
}
async function walSince(lsn: string): Promise<number> {
  const { rows } = await db.raw<{ rows: Array<{ bytes: string }> }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), ?::pg_lsn)::text AS bytes', [lsn]);
  return Number(rows[0]?.bytes ?? 0);
}

function startSealer(): Promise<ChildProcess> {
  const child = spawn(process.execPath, [fileURLToPath(new URL('./audit-sealer.js', import.meta.url)), url, String(SEAL_INTERVAL_MS)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.stdout?.once('data', () => resolve(child));
    child.once('exit', (code) => reject(new Error(`the sealer exited with ${code}`)));
  });
}
const stopSealer = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    child.removeAllListeners('exit');
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });

/** How often autovacuum and autoanalyze have processed audit_log and audit_chain so far (they show up in a round's figure). */
async function vacuums(): Promise<number> {
  const { rows } = await db.raw<{ rows: Array<{ n: number }> }>(
    "SELECT sum(autovacuum_count + autoanalyze_count)::int AS n FROM pg_stat_user_tables WHERE relname IN ('audit_log', 'audit_chain')",
  );
  return rows[0]?.n ?? 0;
}

try {
  await migrateLatest(db);
  const orgs: number[] = [];
  for (let i = 0; i < CONCURRENCY; i++)
    orgs.push(
      (
        await db('organisations')
          .insert({ name: `bench ${i}` })
          .returning<Array<{ id: number }>>('id')
      )[0]?.id ?? 0,
    );

  // 1. Saturation, alternating rounds (ABBA); each round starts with the chain caught up (untimed).
  //    `api`: the service's own audited writes (PUT /api/v1/organisations/:id through a ROLE=api
  //    process: authentication, validation, the change and its audit row); `db`: the leanest audited
  //    write there is (the change and its audit row in one transaction, no HTTP), the worst case.
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  async function compare(label: string, write: (org: number, i: number) => Promise<unknown>) {
    // Warm-up, untimed: a round each way, so that both the writers and a sealer run compiled code.
    await saturate(orgs, SECONDS, write);
    await sealAuditLog(db);
    const warm = await startSealer();
    await saturate(orgs, SECONDS, write);
    await stopSealer(warm);
    await sealAuditLog(db);
    const bare: number[] = [];
    const chained: number[] = [];
    const bareCpu: number[] = [];
    const chainedCpu: number[] = [];
    const bareVacuums: number[] = [];
    const chainedVacuums: number[] = [];
    // WAL bytes per write: the writes alone, and the writes with their sealing (to the last row's).
    const bareWal: number[] = [];
    const chainedWal: number[] = [];
    const chainedRound = async () => {
      const sealer = await startSealer();
      const v = await vacuums();
      const wal = await walLsn();
      const r = await saturate(orgs, SECONDS, write);
      chainedVacuums.push((await vacuums()) - v);
      await stopSealer(sealer);
      chained.push(r.perSecond);
      chainedCpu.push(r.cpuMsPerWrite);
      await sealAuditLog(db);
      chainedWal.push((await walSince(wal)) / r.writes);
    };
    const bareRound = async () => {
      const v = await vacuums();
      const wal = await walLsn();
      const r = await saturate(orgs, SECONDS, write);
      bareWal.push((await walSince(wal)) / r.writes);
      bareVacuums.push((await vacuums()) - v);
      bare.push(r.perSecond);
      bareCpu.push(r.cpuMsPerWrite);
      await sealAuditLog(db);
    };
    for (let round = 0; round < ROUNDS; round++) {
      if (round % 2 === 0) {
        await bareRound();
        await chainedRound();
      } else {
        await chainedRound();
        await bareRound();
      }
      process.stdout.write(
        `${label} round ${round + 1}: without the chain ${bare.at(-1)?.toFixed(0)} writes/s (${bareCpu.at(-1)?.toFixed(3)} CPU ms each, ${bareVacuums.at(-1)} autovacuum/analyze, ${bareWal.at(-1)?.toFixed(0)} WAL bytes), with it ${chained.at(-1)?.toFixed(0)} (${chainedCpu.at(-1)?.toFixed(3)}, ${chainedVacuums.at(-1)}, ${chainedWal.at(-1)?.toFixed(0)})\n`,
      );
    }
    const result = {
      withoutChainPerSecond: sum(bare) / ROUNDS,
      withChainPerSecond: sum(chained) / ROUNDS,
      rounds: bare.map((b, i) => ({
        without: b,
        with: chained[i],
        cpuMsWithout: bareCpu[i],
        cpuMsWith: chainedCpu[i],
        autovacuumsWithout: bareVacuums[i],
        autovacuumsWith: chainedVacuums[i],
        walBytesWithout: bareWal[i],
        walBytesWith: chainedWal[i],
      })),
      cost: sum(bare) / sum(chained) - 1,
      // Robust to one disturbed round: the median of the rounds' own costs.
      medianRoundCost: percentile(
        bare.map((b, i) => b / (chained[i] ?? Number.NaN) - 1).sort((x, y) => x - y),
        50,
      ),
      // The machine's CPU per write (the sealer's and PostgreSQL's included).
      cpuMsPerWriteWithout: sum(bareCpu) / ROUNDS,
      cpuMsPerWriteWith: sum(chainedCpu) / ROUNDS,
      cpuCost: sum(chainedCpu) / sum(bareCpu) - 1,
      // WAL per write, the sealing of the round's rows included (the median round each way).
      walBytesPerWriteWithout: percentile(
        [...bareWal].sort((x, y) => x - y),
        50,
      ),
      walBytesPerWriteWith: percentile(
        [...chainedWal].sort((x, y) => x - y),
        50,
      ),
    };
    process.stdout.write(
      `${label} saturation: ${result.withoutChainPerSecond.toFixed(0)} → ${result.withChainPerSecond.toFixed(0)} writes/s, cost ${(result.cost * 100).toFixed(1)}%, median of the rounds ${(result.medianRoundCost * 100).toFixed(1)}%; CPU per write ${result.cpuMsPerWriteWithout.toFixed(3)} → ${result.cpuMsPerWriteWith.toFixed(3)} ms, ${(result.cpuCost * 100).toFixed(1)}%; WAL per write ${result.walBytesPerWriteWithout.toFixed(0)} → ${result.walBytesPerWriteWith.toFixed(0)} bytes\n`,
    );
    return result;
  }

  const signer = await startSigner();
  const operatorToken = `sk_test_${randomBytes(24).toString('base64url')}`;
  const port = await freePort();
  const api = spawnService({
    DATABASE_URL: url,
    ROLE: 'api',
    PORT: String(port),
    KEYVAULT_URL: signer.url,
    KEYVAULT_TOKEN: signer.token,
    OPERATOR_TOKEN: operatorToken,
    DATA_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    LOG_LEVEL: 'warn',
    RATE_LIMIT_TOKEN: '0',
    RATE_LIMIT_PROJECT: '0',
  });
  let saturation;
  try {
    // Requests are not logged at warn: readiness is polled.
    await until('the API to be ready', async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200, 30_000);
    const base = `http://127.0.0.1:${port}/api/v1/organisations/`;
    const headers = { authorization: `Bearer ${operatorToken}`, 'content-type': 'application/json' };
    const viaApi = async (org: number, i: number) => {
      const res = await fetch(`${base}${org}`, { method: 'PUT', headers, body: JSON.stringify({ name: `bench ${i}` }) });
      if (res.status !== 200) throw new Error(`PUT answered ${res.status}: ${await res.text()}`);
    };
    saturation = await compare('api', viaApi);
  } finally {
    api.proc.kill('SIGTERM');
    await api.exited;
    await signer.destroy();
  }
  const lean = await compare('db', auditedWrite);

  // 2. Lag at a steady rate: the sealer in this process (the callback names what each pass sealed).
  const committed = new Map<number, number>();
  const lags: number[] = [];
  let sealing = true;
  const sealer = (async () => {
    while (sealing) {
      await sealAuditLog(db, undefined, (ids) => {
        const at = performance.now();
        for (const id of ids) {
          const c = committed.get(id);
          if (c !== undefined) lags.push(at - c);
        }
      });
      await new Promise((r) => setTimeout(r, SEAL_INTERVAL_MS));
    }
  })();
  const started = performance.now();
  const total = RATE * LAG_SECONDS;
  const inFlight: Array<Promise<void>> = [];
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    inFlight.push(auditedWrite(orgs[i % orgs.length] ?? 0, i).then((id) => void committed.set(id, performance.now())));
  }
  await Promise.all(inFlight);
  const achieved = total / ((performance.now() - started) / 1000);
  while ((await unsealedCount(db)) > 0) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, SEAL_INTERVAL_MS * 2));
  sealing = false;
  await sealer;
  lags.sort((a, b) => a - b);
  const lag = { ratePerSecond: achieved, measured: lags.length, p50Ms: percentile(lags, 50), p99Ms: percentile(lags, 99), maxMs: lags.at(-1) ?? Number.NaN };
  process.stdout.write(
    `lag at ${achieved.toFixed(0)} writes/s: p50 ${lag.p50Ms.toFixed(0)} ms, p99 ${lag.p99Ms.toFixed(0)} ms, max ${lag.maxMs.toFixed(0)} ms (goal < 1,000 ms)\n`,
  );

  // 3. A chain of ROWS rows: made in bulk, sealed by the sealer, verified; the same rows read bare for the ratio.
  const have = Number((await db('audit_log').count<Array<{ count: number }>>('* as count'))[0]?.count);
  await db.raw(
    `INSERT INTO audit_log (organisation_id, actor, action, target, status, request_id, details)
     SELECT 1 + g % 50, 'token:' || (g % 7), 'PUT /api/v1/organisations/:id', (g % 50)::text, 200, 'req-' || g, jsonb_build_object('params', jsonb_build_object('id', (g % 50)::text))
       FROM generate_series(1, ?) AS g`,
    [Math.max(0, ROWS - have)],
  );
  const sealStarted = performance.now();
  const sealedNow = await sealAuditLog(db, 10_000);
  const sealSeconds = (performance.now() - sealStarted) / 1000;
  const size = (await chainHead(db))?.seq ?? 0;
  process.stdout.write(`sealed ${sealedNow} rows in ${sealSeconds.toFixed(1)} s (${(sealedNow / sealSeconds).toFixed(0)} rows/s); chain of ${size}\n`);
  const readStarted = performance.now();
  for (let after = 0; ;) {
    const rows = await sealedRows(db, { after, limit: 10_000 });
    if (rows.length < 10_000) break;
    after = rows[rows.length - 1]?.seq ?? after;
  }
  const readSeconds = (performance.now() - readStarted) / 1000;
  const verifyStarted = performance.now();
  const report = await readChain(db, { keys: [] });
  const verifySeconds = (performance.now() - verifyStarted) / 1000;
  if (!report.ok || report.rows !== size) throw new Error(`the chain did not verify: ${JSON.stringify(report)}`);
  const verify = {
    rows: report.rows,
    seconds: verifySeconds,
    bareReadSeconds: readSeconds,
    ratio: verifySeconds / readSeconds,
    sealRowsPerSecond: sealedNow / sealSeconds,
  };
  process.stdout.write(
    `verified ${report.rows} rows in ${verifySeconds.toFixed(1)} s (reading them bare: ${readSeconds.toFixed(1)} s, ${verify.ratio.toFixed(2)}×) (goal < 60 s)\n`,
  );

  const file = writeResult('audit', {
    settings: { concurrency: CONCURRENCY, rounds: ROUNDS, seconds: SECONDS, rate: RATE, lagSeconds: LAG_SECONDS, rows: ROWS, sealIntervalMs: SEAL_INTERVAL_MS },
    saturation,
    leanSaturation: lean,
    lag,
    verify,
  });
  process.stdout.write(`${file}\n`);
} finally {
  await db.destroy();
  await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}
