import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';

export const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;

export interface Run {
  ops: number;
  seconds: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
}

/** Runs `op` `total` times with `concurrency` in flight; latency per call, throughput overall. */
export async function closedLoop(total: number, concurrency: number, op: (i: number) => Promise<unknown>): Promise<Run> {
  const latencies: number[] = [];
  let next = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        const i = next++;
        const t = process.hrtime.bigint();
        await op(i);
        latencies.push(Number(process.hrtime.bigint() - t) / 1e6);
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  latencies.sort((a, b) => a - b);
  return { ops: total, seconds, perSecond: total / seconds, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99) };
}

export const machine = () => ({ cpus: cpus().length, cpu: cpus()[0]?.model ?? 'unknown', node: process.version });

/** Writes bench/results/<name>-<timestamp>.json and bench/results/<name>-latest.json. */
export function writeResult(name: string, result: unknown): string {
  const dir = fileURLToPath(new URL('../../bench/results/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  const body = JSON.stringify({ name, at: new Date().toISOString(), machine: machine(), ...(result as object) }, null, 2);
  const file = `${dir}${name}-${new Date().toISOString().replace(/[:.]/g, '-')}.json`;
  writeFileSync(file, body);
  writeFileSync(`${dir}${name}-latest.json`, body);
  return file;
}
