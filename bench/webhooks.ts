import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Client } from '../test/support/http.js';
import { freePort, spawnService } from '../test/support/process.js';
import { startSigner } from '../test/support/signer.js';
import { startStack } from '../test/support/stack.js';
import { percentile, writeResult } from './stats.js';

/**
 * Subscription deliveries through one ROLE=worker process (the relay) to a local receiver that
 * answers at once, beside the ceiling measured in the same run: a bare loop (its own process)
 * POSTing the same signed bodies to the same receiver at the same concurrency, no database.
 * Then the latency from commit to receipt at a steady 200 events/s.
 */
const EVENTS = Number(process.env['BENCH_EVENTS'] ?? 30_000);
const CONCURRENCY = Number(process.env['BENCH_CONCURRENCY'] ?? 16);
const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 10);
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;

const address = () => `0x${randomBytes(20).toString('hex')}`;
const items = (n: number) => Array.from({ length: n }, (_, i) => ({ membershipType: `bench:t${i % 7}`, walletAddress: address() }));

const stack = await startStack('bench-webhooks');
const { receiver } = stack;
const signer = await startSigner();
const common = {
  DATABASE_URL: stack.db.url,
  EGRESS_ALLOW_PRIVATE: '127.0.0.0/8,::1/128',
  DATA_DIR: stack.dir,
  KEYVAULT_URL: signer.url,
  KEYVAULT_TOKEN: signer.token,
  OPERATOR_TOKEN: stack.operatorToken,
  DATA_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
  LOG_LEVEL: 'warn',
  // The benchmark measures deliveries, not rate limits.
  RATE_LIMIT_TOKEN: '0',
  RATE_LIMIT_PROJECT: '0',
};
const migrate = spawnService({ ...common, ROLE: 'migrate' });
if ((await migrate.exited) !== 0) throw new Error(migrate.output());
const port = await freePort();
const api = spawnService({ ...common, ROLE: 'api', PORT: String(port), LOG_LEVEL: 'info' });
const workerEnv = {
  ...common,
  ROLE: 'worker',
  PORT: '0',
  RELAY_CONCURRENCY: String(CONCURRENCY),
  WEBHOOK_ENDPOINT_CONCURRENCY: String(CONCURRENCY),
  RELAY_POLL_MS: '200',
  LOG_LEVEL: 'info',
};
// BENCH_PROFILE_DIR: a CPU profile of the worker is written there.
const profileArgs = process.env['BENCH_PROFILE_DIR'] ? ['--cpu-prof', `--cpu-prof-dir=${process.env['BENCH_PROFILE_DIR']}`] : [];
let worker: ReturnType<typeof spawnService> | undefined;
const sql = new pg.Client({ connectionString: stack.db.url });
try {
  await api.waitFor(/listening on http/);
  await sql.connect();
  const operator = new Client(`http://127.0.0.1:${port}`, stack.operatorToken);
  const org = await operator.post('/api/v1/organisations', { name: 'Bench' });
  const project = await operator.post(`/api/v1/organisations/${org.body.id}/projects`, { name: 'p', issuer: 'https://idp.example.com' });
  const token = await operator.post(`/api/v1/organisations/${org.body.id}/tokens`, { name: 'b', role: 'admin', projectId: project.body.id });
  const client = operator.withToken(token.body.token);
  const sub = await client.post(`/api/v1/project/${project.body.id}/webhooks`, { url: receiver.url, events: ['*'], secret: SECRET });
  if (sub.status !== 201) throw new Error(sub.text);

  // Throughput: the events are committed first, then one relay drains them.
  for (let left = EVENTS; left > 0; left -= 3_000) {
    const r = await client.post('/api/v1/membership/issue', items(Math.min(1_000, Math.ceil(left / 3))));
    if (r.status !== 201) throw new Error(r.text);
  }
  const { rows: counted } = await sql.query<{ n: number }>(`SELECT sum(json_array_length(payload::json))::int AS n FROM outbox WHERE kind = 'event'`);
  const events = counted[0]?.n ?? 0;
  worker = spawnService(workerEnv, undefined, profileArgs);
  await worker.waitFor(/outbox relay running/);
  const started = Date.now();
  while (receiver.received.length < events) await new Promise((r) => setTimeout(r, 20));
  // Both sides are timed the same way: from the receipt of their first delivery to that of their last.
  const steadyRate = (from: number, count: number) => {
    const first = receiver.received[from]?.at ?? 0;
    const last = receiver.received[from + count - 1]?.at ?? 0;
    return count / Math.max(0.001, (last - first) / 1000);
  };
  const relaySeconds = ((receiver.received.at(-1)?.at ?? Date.now()) - started) / 1000;
  const relay = {
    deliveries: events,
    seconds: relaySeconds,
    perSecond: steadyRate(0, events),
    perSecondFromStart: events / relaySeconds,
    concurrency: CONCURRENCY,
  };
  console.log(
    `relay (one worker process): ${relay.perSecond.toFixed(0)} deliveries/s first to last receipt (${relay.perSecondFromStart.toFixed(0)}/s counting from the worker's start: ${events} in ${relaySeconds.toFixed(1)} s), concurrency ${CONCURRENCY}`,
  );

  // The ceiling: the same stored bodies, signed, posted by a bare loop at the same concurrency.
  const { rows: bodies } = await sql.query<{ id: string; body: string }>(
    `SELECT e->>'id' AS id, e::text AS body FROM outbox o CROSS JOIN LATERAL json_array_elements(o.payload::json) e WHERE o.kind = 'event' ORDER BY o.id`,
  );
  const bodiesFile = path.join(stack.dir, 'bodies.json');
  writeFileSync(bodiesFile, JSON.stringify(bodies));
  const bareFrom = receiver.received.length;
  const bare = spawnService(
    { BODIES_FILE: bodiesFile, TARGET: receiver.url, CONCURRENCY: String(CONCURRENCY), SECRET },
    fileURLToPath(new URL('./bare-webhook-loop.js', import.meta.url)),
  );
  if ((await bare.exited) !== 0) throw new Error(bare.output());
  const own = JSON.parse(bare.output().trim().split('\n').at(-1) ?? '{}') as { perSecond: number; seconds: number; sent: number };
  const ceiling = { ...own, perSecondOwnClock: own.perSecond, perSecond: steadyRate(bareFrom, own.sent) };
  const ratio = relay.perSecond / ceiling.perSecond;
  console.log(`bare loop, same bodies and concurrency: ${ceiling.perSecond.toFixed(0)} deliveries/s  ratio ${ratio.toFixed(2)} (goal >= 0.5)`);

  // Latency at a steady 200 events/s: one-item issues (3 events each) at 200/3 calls per second.
  const before = receiver.received.length;
  const calls = Math.round((200 / 3) * SECONDS);
  const t0 = Date.now();
  const pending: Array<Promise<unknown>> = [];
  for (let i = 0; i < calls; i++) {
    const wait = t0 + (i * 3000) / 200 - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    pending.push(
      client.post('/api/v1/membership/issue', items(1)).then((r) => {
        if (r.status !== 201) throw new Error(r.text);
      }),
    );
  }
  await Promise.all(pending);
  const expected = before + calls * 3;
  const deadline = Date.now() + 60_000;
  while (receiver.received.length < expected && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  // From the event's createdAt (taken just before its transaction commits) to its receipt.
  const latencies = receiver.received
    .slice(before)
    .map((r) => r.at - Date.parse((JSON.parse(r.body) as { createdAt: string }).createdAt))
    .sort((a, b) => a - b);
  const steady = {
    eventsPerSecond: 200,
    seconds: SECONDS,
    expected: calls * 3,
    received: latencies.length,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
  };
  console.log(
    `commit → receipt at 200 events/s: p50 ${steady.p50Ms} ms, p99 ${steady.p99Ms} ms (goal p99 <= 250 ms), ${steady.received}/${steady.expected} received`,
  );

  const file = writeResult('webhooks', {
    relay,
    ceiling: { ...ceiling, concurrency: CONCURRENCY },
    ratio,
    goalRatio: 0.5,
    steady200: { ...steady, goalP99Ms: 250 },
  });
  console.log(`results: ${file}`);
} finally {
  worker?.proc.kill('SIGTERM');
  api.proc.kill('SIGTERM');
  await Promise.all([worker?.exited, api.exited]);
  await sql.end().catch(() => undefined);
  await signer.destroy();
  await stack.teardown();
}
