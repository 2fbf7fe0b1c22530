import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '../test/support/http.js';
import { freePort, spawnService } from '../test/support/process.js';
import { startStack } from '../test/support/stack.js';
import { LoadClient } from './load.js';
import { drain } from './topology.js';
import { createAsyncToWebhook } from './wallet-webhooks.js';
import { BENCH_NODE_ARGS, closedLoop, fixedRate, percentile, Slices, withCpu, writeResult, type Measured } from './stats.js';

/**
 * Wallet endpoints with the local signer: existing-user sign-in at saturation beside a bare
 * node:http + pg + jose server doing the same per-request work, then latency at fixed rates.
 */
const AUDIENCE = 'urn:custody:testnet';
/** Length of each fixed-rate run. */
const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 10);
/** BENCH_ONLY=saturation stops after the saturation runs (for profiling them alone). */
/** Requests before each saturation run is measured (both servers' code compiled, pools filled). */
const WARM_UP = Number(process.env['BENCH_WARM_UP'] ?? 5000);
/** Saturation slices per server, and requests per server over all of them. */
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 10);
const SATURATION_REQUESTS = Number(process.env['BENCH_SATURATION_REQUESTS'] ?? 30_000);
const ONLY_SATURATION = process.env['BENCH_ONLY'] === 'saturation';

class Stop extends Error {}

const stack = await startStack('bench');
const { idp, receiver, db, operatorToken } = stack;
const port = await freePort();
/** The service's environment for the benchmark, listening on `onPort`. */
// One data encryption key for both service processes: the compared one's relay delivers wallet
// webhooks too, and must open the secrets the first one sealed.
const dataEncryptionKey = randomBytes(32).toString('base64');
const benchServiceEnv = (onPort: number): Record<string, string> => ({
  ...stack.serviceEnv(onPort),
  DATA_ENCRYPTION_KEY: dataEncryptionKey,
  // The service as users run it: its default rate limits are on (the limits-off figure runs beside it).
  // The default pool size, and the bare server's: like with like.
  DB_POOL_MAX: process.env['BENCH_DB_POOL_MAX'] ?? '10',
  RELAY_POLL_MS: '200',
  ...(process.env['BENCH_LOG_LEVEL'] ? { LOG_LEVEL: process.env['BENCH_LOG_LEVEL'] } : {}),
});
const svc = spawnService(benchServiceEnv(port), undefined, BENCH_NODE_ARGS);
// BENCH_COMPARE=1: a second service process in the saturation runs, interleaved with the first
// (the only comparison this machine's noise allows at a few per cent): BENCH_COMPARE_ENTRY, another
// build's dist/src/programs/main.js (same schema), and/or BENCH_COMPARE_ENV, extra "K=V K=V" variables.
const compare = process.env['BENCH_COMPARE'] !== '0';
/** Without BENCH_COMPARE_ENTRY/BENCH_COMPARE_ENV, the compared process is this build with every rate limit off. */
const LIMITS_OFF = 'RATE_LIMIT_TOKEN=0 RATE_LIMIT_PROJECT=0 RATE_LIMIT_AUTH_FAILURES=0';
const compareLabel = process.env['BENCH_COMPARE_ENTRY'] || process.env['BENCH_COMPARE_ENV'] ? 'compared service' : 'service, rate limits off';
/** Sign-ins are spread over this many projects, each under its default limit (a per-project limit is a tenant's, not the deployment's). */
const PROJECTS = Number(process.env['BENCH_PROJECTS'] ?? 32);
let svcB: ReturnType<typeof spawnService> | undefined;
let bare: ReturnType<typeof spawnService> | undefined;
let koa: ReturnType<typeof spawnService> | undefined;
const loadClients: LoadClient[] = [];
try {
  await svc.waitFor(/listening on http/, 60_000);
  drain(svc);
  const api = new Client(`http://127.0.0.1:${port}`, operatorToken);
  const iss = await idp.issuer();
  const org = await api.post('/api/v1/organisations', { name: 'Bench' });
  const keys: string[] = [];
  for (let p = 0; p < PROJECTS; p++) {
    const project = await api.post(`/api/v1/organisations/${org.body.id}/projects`, {
      name: `p${p}`,
      issuer: iss.issuer,
      walletWebhookUrl: receiver.url,
    });
    keys.push(project.body.projectKey);
  }
  const key = keys[0] ?? '';
  const existing = await iss.sign({ email: 'existing@bench.example.com' }, { audience: AUDIENCE, expiresIn: '1h' });
  const signinBody = JSON.stringify({ key });
  const bodies = keys.map((k) => JSON.stringify({ key: k }));
  /** Sign-in `i` goes to project `i mod PROJECTS` (the fixed-rate runs use the first project only). */
  const signin = (client: LoadClient, jwt: string, i = 0) =>
    client.post('/api/v1/signin', bodies[i % bodies.length] ?? signinBody, jwt).then((r) => {
      if (r.status !== 200) throw new Error(`signin answered ${r.status}: ${r.text}`);
    });
  const load = new LoadClient(`http://127.0.0.1:${port}`);
  loadClients.push(load);
  for (let p = 0; p < PROJECTS; p++) await signin(load, existing, p);

  // A sign-in server of bench/ doing the service's work with less around it, and its client.
  const ceiling = async (script: string, banner: RegExp) => {
    const serverPort = await freePort();
    const server = spawnService(
      { DATABASE_URL: db.url, PORT: String(serverPort), JWKS: JSON.stringify({ keys: iss.keys.map((k) => k.publicJwk) }), ISSUER: iss.issuer, AUDIENCE },
      fileURLToPath(new URL(script, import.meta.url)),
      BENCH_NODE_ARGS,
    );
    await server.waitFor(banner);
    drain(server);
    const client = new LoadClient(`http://127.0.0.1:${serverPort}`);
    loadClients.push(client);
    return { server, client };
  };
  const bareSide = await ceiling('./bare-signin-server.js', /bare server listening/);
  bare = bareSide.server;
  const bareClient = bareSide.client;
  // The same work behind Koa, @koa/router and koa-body only: the framework's own share of the gap.
  const koaSide = await ceiling('./koa-signin-server.js', /koa server listening/);
  koa = koaSide.server;
  const koaClient = koaSide.client;
  // Started once the first has migrated the database.
  const comparePort = await freePort();
  const compareEnv = Object.fromEntries(
    (process.env['BENCH_COMPARE_ENV'] ?? (process.env['BENCH_COMPARE_ENTRY'] ? '' : LIMITS_OFF))
      .split(' ')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
  svcB = compare
    ? spawnService(
        { ...benchServiceEnv(comparePort), DATA_DIR: mkdtempSync(join(tmpdir(), 'bench-compare-')), ...compareEnv },
        process.env['BENCH_COMPARE_ENTRY'],
        BENCH_NODE_ARGS,
      )
    : undefined;
  const compareClient = new LoadClient(`http://127.0.0.1:${comparePort}`);
  loadClients.push(compareClient);
  if (svcB) {
    await svcB.waitFor(/listening on http/, 60_000);
    drain(svcB);
    await signin(compareClient, existing);
  }

  // Saturation, in ROUNDS slices taken turn by turn (bare, service, bare, …) so that a drift in
  // the machine's speed touches both alike; throughput, latency and each server's own CPU time per
  // request are totalled over its slices.
  const cpu = (r: Measured) =>
    (r.cpuMsPerOp === undefined ? '' : `, ${r.cpuMsPerOp.toFixed(3)} ms CPU/request`) +
    (r.mainThreadCpuMsPerOp === undefined ? '' : ` (main thread ${r.mainThreadCpuMsPerOp.toFixed(3)})`) +
    (r.instructionsPerOp === undefined ? '' : `, ${(r.instructionsPerOp / 1e6).toFixed(2)} M instructions/request`) +
    (r.machineCpuMsPerOp === undefined ? '' : `; machine ${r.machineCpuMsPerOp.toFixed(3)} ms/request (idle ${((r.idleShare ?? 0) * 100).toFixed(0)}%)`) +
    (r.postgresCpuMsPerOp === undefined ? '' : `, PostgreSQL ${r.postgresCpuMsPerOp.toFixed(3)}`) +
    (r.clientCpuMsPerOp === undefined ? '' : `, load client ${r.clientCpuMsPerOp.toFixed(3)}`);
  await closedLoop(WARM_UP, 64, (i) => signin(bareClient, existing, i));
  await closedLoop(WARM_UP, 64, (i) => signin(koaClient, existing, i));
  await closedLoop(WARM_UP, 64, (i) => signin(load, existing, i));
  if (svcB) await closedLoop(WARM_UP, 64, (i) => signin(compareClient, existing, i));
  const total = { bare: new Slices(), koa: new Slices(), service: new Slices(), compare: new Slices() };
  const perSlice = Math.round(SATURATION_REQUESTS / ROUNDS);
  for (let r = 0; r < ROUNDS; r++) {
    const contestants = [
      ['bare', bareClient, bare.proc.pid],
      ['koa', koaClient, koa.proc.pid],
      ['service', load, svc.proc.pid],
    ] as Array<[keyof typeof total, LoadClient, number | undefined]>;
    if (svcB) contestants.push(['compare', compareClient, svcB.proc.pid]);
    for (const [name, client, pid] of contestants) {
      const slice = await withCpu(pid, () => closedLoop(perSlice, 64, (i) => signin(client, existing, i), total[name].latencies));
      total[name].add(slice);
    }
  }
  const bareRun = total.bare.run();
  const koaRun = total.koa.run();
  const service = total.service.run();
  const ratio = service.perSecond / bareRun.perSecond;
  const roundRatios = total.service.slices.map((s, i) => s.perSecond / (total.bare.slices[i]?.perSecond ?? Number.NaN));
  console.log(`bare server, existing-user signin @64: ${bareRun.perSecond.toFixed(0)} req/s, p99 ${bareRun.p99Ms.toFixed(1)} ms${cpu(bareRun)}`);
  console.log(
    `Koa + router + koa-body, same work @64: ${koaRun.perSecond.toFixed(0)} req/s, p99 ${koaRun.p99Ms.toFixed(1)} ms  ratio ${(koaRun.perSecond / bareRun.perSecond).toFixed(2)}${cpu(koaRun)}`,
  );
  console.log(
    `service, existing-user signin @64: ${service.perSecond.toFixed(0)} req/s, p99 ${service.p99Ms.toFixed(1)} ms  ratio ${ratio.toFixed(2)} (goal >= 0.65)${cpu(service)}`,
  );
  const compared = svcB ? total.compare.run() : undefined;
  if (compared) {
    console.log(
      `${compareLabel}, existing-user signin @64: ${compared.perSecond.toFixed(0)} req/s  ratio ${(compared.perSecond / bareRun.perSecond).toFixed(2)}${cpu(compared)}`,
    );
    console.log(
      `  service / ${compareLabel}: throughput ${(service.perSecond / compared.perSecond).toFixed(3)}, main-thread CPU per request ${((service.mainThreadCpuMsPerOp ?? Number.NaN) / (compared.mainThreadCpuMsPerOp ?? Number.NaN)).toFixed(3)}`,
    );
  }
  console.log(`  per round (service/bare): ${roundRatios.map((r) => r.toFixed(2)).join(', ')}`);

  if (ONLY_SATURATION) throw new Stop();
  // The latency runs measure the service alone: the compared process (and its relay) stops here.
  if (svcB) {
    svcB.proc.kill('SIGTERM');
    await svcB.exited;
  }

  // The same fixed rate against the bare server shows how much of the tail is the machine's.
  const bare200 = await fixedRate(200, SECONDS, () => signin(bareClient, existing));
  console.log(`bare server at 200/s: p50 ${bare200.p50Ms.toFixed(1)} ms, p99 ${bare200.p99Ms.toFixed(1)} ms`);
  const existing200 = await fixedRate(200, SECONDS, () => signin(load, existing));
  console.log(`existing-user signin at 200/s: p50 ${existing200.p50Ms.toFixed(1)} ms, p99 ${existing200.p99Ms.toFixed(1)} ms (goal p99 <= 25 ms)`);

  const newJwts = await Promise.all(
    Array.from({ length: 20 * SECONDS }, (_, i) => iss.sign({ email: `new${i}@bench.example.com` }, { audience: AUDIENCE, expiresIn: '1h' })),
  );
  const new20 = await fixedRate(20, SECONDS, (i) => signin(load, newJwts[i]!));
  console.log(`new-user signin at 20/s: p50 ${new20.p50Ms.toFixed(1)} ms, p99 ${new20.p99Ms.toFixed(1)} ms (goal p99 <= 100 ms)`);

  // createasync → webhook received, at 50/s.
  const asyncJwts = await Promise.all(
    Array.from({ length: 50 * SECONDS }, (_, i) => iss.sign({ email: `async${i}@bench.example.com` }, { audience: AUDIENCE, expiresIn: '1h' })),
  );
  const emails = asyncJwts.map((_, i) => `async${i}@bench.example.com`);
  const webhookLatencies = (await createAsyncToWebhook(load, receiver, { rate: 50, seconds: SECONDS, body: signinBody, jwts: asyncJwts, emails })).sort(
    (x, y) => x - y,
  );
  const toWebhook = {
    rate: 50,
    seconds: SECONDS,
    sent: asyncJwts.length,
    received: webhookLatencies.length,
    p50Ms: percentile(webhookLatencies, 50),
    p99Ms: percentile(webhookLatencies, 99),
  };
  console.log(`createasync → webhook received at 50/s: p50 ${toWebhook.p50Ms.toFixed(0)} ms, p99 ${toWebhook.p99Ms.toFixed(0)} ms (goal p99 <= 1000 ms)`);

  const file = writeResult('wallets', {
    saturation: {
      bare: bareRun,
      koaOnly: koaRun,
      koaOnlyRatio: koaRun.perSecond / bareRun.perSecond,
      service,
      ratio,
      goal: 0.65,
      rounds: ROUNDS,
      requestsPerServer: SATURATION_REQUESTS,
      warmUp: WARM_UP,
      roundRatios,
      projects: PROJECTS,
      defaultRateLimits: true,
      ...(compared
        ? {
            compared: {
              label: compareLabel,
              run: compared,
              ratio: compared.perSecond / bareRun.perSecond,
              serviceOverCompared: service.perSecond / compared.perSecond,
            },
          }
        : {}),
    },
    existingSignin200: { ...existing200, goalP99Ms: 25, bare: bare200 },
    newSignin20: { ...new20, goalP99Ms: 100 },
    createasyncToWebhook50: { ...toWebhook, goalP99Ms: 1000 },
  });
  console.log(`results: ${file}`);
} catch (err) {
  if (!(err instanceof Stop)) throw err;
} finally {
  for (const c of loadClients) c.close();
  bare?.proc.kill('SIGTERM');
  koa?.proc.kill('SIGTERM');
  svcB?.proc.kill('SIGTERM');
  svc.proc.kill('SIGTERM');
  await svc.exited;
  await stack.teardown();
}
