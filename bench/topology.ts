import { randomBytes } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { spawnService, type Service } from '../test/support/process.js';
import { startSigner, type RunningSigner } from '../test/support/signer.js';
import type { Stack } from '../test/support/stack.js';

/**
 * How a benchmark runs the service. `all` (the default): one `ROLE=all` process, as `npm start`
 * runs it (its signer a child on a Unix socket). `chart`: the components the Helm chart deploys,
 * one replica each, as processes of their own (the signer, `ROLE=migrate` once, `ROLE=api`,
 * `ROLE=worker`), the signer over loopback HTTP where the chart uses TLS between pods. On one
 * two-core machine the chart's processes share cores that its pods would not, so `chart` is a
 * variant here. Both with the service's default settings.
 */
export type Topology = 'chart' | 'all';

export interface RunningService {
  topology: Topology;
  /** The processes started, by name, for profiles and priorities. */
  processes: Record<string, Service>;
  stop(): Promise<void>;
}

/**
 * After start-up a child's output is read and dropped, not kept in the generator's memory; with
 * BENCH_SERVICE_LOG set, appended to that file (to see why a run failed).
 */
export const drain = (s: Service) => {
  const file = process.env['BENCH_SERVICE_LOG'];
  for (const stream of [s.proc.stdout, s.proc.stderr]) {
    stream?.removeAllListeners('data');
    if (file) stream?.on('data', (chunk: Buffer) => appendFileSync(file, chunk));
    else stream?.resume();
  }
};

const stopAll = async (services: Service[]) => {
  for (const s of services) if (s.proc.exitCode === null && s.proc.signalCode === null) s.proc.kill('SIGTERM');
  await Promise.all(services.map((s) => s.exited));
};

export function topologyFromEnv(): Topology {
  const t = process.env['BENCH_TOPOLOGY'] ?? 'all';
  if (t !== 'chart' && t !== 'all') throw new Error(`BENCH_TOPOLOGY must be chart or all, not ${t}`);
  return t;
}

/** Starts the service on `port` against `stack`, waits until it listens, and drains its output. */
export async function startService(topology: Topology, stack: Stack, port: number, nodeArgs: string[] = []): Promise<RunningService> {
  const dataKey = randomBytes(32).toString('base64');
  if (topology === 'all') {
    const svc = spawnService({ ...stack.serviceEnv(port), DATA_ENCRYPTION_KEY: dataKey }, undefined, nodeArgs);
    await svc.waitFor(/listening on http/, 60_000);
    drain(svc);
    return { topology, processes: { all: svc }, stop: () => stopAll([svc]) };
  }
  let signer: RunningSigner | undefined;
  const started: Service[] = [];
  try {
    signer = await startSigner();
    const common = { ...stack.serviceEnv(port), DATA_ENCRYPTION_KEY: dataKey, KEYVAULT_URL: signer.url, KEYVAULT_TOKEN: signer.token };
    const migrate = spawnService({ ...common, ROLE: 'migrate' });
    if ((await migrate.exited) !== 0) throw new Error(migrate.output());
    const api = spawnService({ ...common, ROLE: 'api', PORT: String(port) }, undefined, nodeArgs);
    started.push(api);
    const worker = spawnService({ ...common, ROLE: 'worker', PORT: '0' }, undefined, nodeArgs);
    started.push(worker);
    await Promise.all([api.waitFor(/listening on http/, 60_000), worker.waitFor(/outbox relay running/, 60_000)]);
    for (const s of [api, worker, signer.service]) drain(s);
    const running = signer;
    return {
      topology,
      processes: { api, worker, signer: signer.service },
      stop: async () => {
        await stopAll(started);
        await running.destroy();
      },
    };
  } catch (err) {
    await stopAll(started);
    await signer?.destroy();
    throw err;
  }
}
