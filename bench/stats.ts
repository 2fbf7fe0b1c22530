import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
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

/**
 * Runs `op` `total` times with `concurrency` in flight; latency per call, throughput overall.
 * `sink`, when given, also receives every latency (to pool several runs into one distribution).
 */
export async function closedLoop(total: number, concurrency: number, op: (i: number) => Promise<unknown>, sink?: number[]): Promise<Run> {
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
  sink?.push(...latencies);
  latencies.sort((a, b) => a - b);
  return { ops: total, seconds, perSecond: total / seconds, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99) };
}

/** Node flags for the processes a benchmark starts, e.g. BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof". */
export const BENCH_NODE_ARGS = (process.env['BENCH_NODE_ARGS'] ?? '').split(' ').filter(Boolean);

export type Measured = Run & {
  cpuMsPerOp?: number;
  mainThreadCpuMsPerOp?: number;
  instructionsPerOp?: number;
  /** The whole machine's busy CPU (all processes, /proc/stat) per operation. */
  machineCpuMsPerOp?: number;
  /** PostgreSQL's processes' CPU per operation (every process named postgres). */
  postgresCpuMsPerOp?: number;
  /** The benchmark process's own CPU per operation (its load client, and the IdP and receiver it hosts). */
  clientCpuMsPerOp?: number;
  /** The service's child processes' CPU per operation (under ROLE=all: its signer). */
  childCpuMsPerOp?: number;
  /** The share of the machine's CPU time left idle during the measurement. */
  idleShare?: number;
};

type PerOp = 'cpuMsPerOp' | 'mainThreadCpuMsPerOp' | 'instructionsPerOp' | 'machineCpuMsPerOp' | 'postgresCpuMsPerOp' | 'clientCpuMsPerOp' | 'childCpuMsPerOp';

/**
 * Slices of one measurement taken turn by turn with another's (so a drift of the machine's speed
 * touches both alike), added up: operations over time, latencies pooled (pass `latencies` to
 * closedLoop as its sink), CPU figures weighted by operations.
 */
export class Slices {
  readonly latencies: number[] = [];
  readonly slices: Measured[] = [];

  add(slice: Measured): void {
    this.slices.push(slice);
  }

  run(): Measured {
    const ops = this.slices.reduce((a, s) => a + s.ops, 0);
    const seconds = this.slices.reduce((a, s) => a + s.seconds, 0);
    const sorted = [...this.latencies].sort((a, b) => a - b);
    const mean = (key: PerOp) =>
      this.slices.every((s) => s[key] !== undefined) ? { [key]: this.slices.reduce((a, s) => a + (s[key] ?? 0) * s.ops, 0) / ops } : {};
    const idle = this.slices.every((s) => s.idleShare !== undefined)
      ? { idleShare: this.slices.reduce((a, s) => a + (s.idleShare ?? 0) * s.seconds, 0) / seconds }
      : {};
    const keys: PerOp[] = [
      'cpuMsPerOp',
      'mainThreadCpuMsPerOp',
      'instructionsPerOp',
      'machineCpuMsPerOp',
      'postgresCpuMsPerOp',
      'clientCpuMsPerOp',
      'childCpuMsPerOp',
    ];
    const perOp: Partial<Record<PerOp, number>> = Object.assign({}, ...keys.map(mean)) as Partial<Record<PerOp, number>>;
    return { ops, seconds, perSecond: ops / seconds, p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99), ...perOp, ...idle };
  }
}

export const machine = () => ({ cpus: cpus().length, cpu: cpus()[0]?.model ?? 'unknown', node: process.version });

/** Writes bench/results/<name>-<timestamp>.json and bench/results/<name>-latest.json. */
/**
 * The code measured: the checkout's commit, and whether files other than results differed from
 * it (BENCHMARKS.md counts the runs of one commit); undefined outside a git checkout.
 */
function code(): { commit: string; dirty: boolean } | undefined {
  try {
    const git = (...args: string[]) => execFileSync('git', args, { cwd: fileURLToPath(new URL('../../', import.meta.url)), encoding: 'utf8' }).trim();
    const changed = git('status', '--porcelain', '--', '.', ':(exclude)bench/results');
    return { commit: git('rev-parse', '--short=7', 'HEAD'), dirty: changed !== '' };
  } catch {
    return undefined;
  }
}

export function writeResult(name: string, result: unknown): string {
  const dir = fileURLToPath(new URL('../../bench/results/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  const body = JSON.stringify({ name, at: new Date().toISOString(), machine: machine(), code: code(), ...(result as object) }, null, 2);
  const file = `${dir}${name}-${new Date().toISOString().replace(/[:.]/g, '-')}.json`;
  writeFileSync(file, body);
  writeFileSync(`${dir}${name}-latest.json`, body);
  return file;
}

/**
 * CPU seconds (user + system) a process has used so far, from /proc; undefined where there is
 * none. `mainThread`: its main thread's alone (a Node server's JavaScript runs there; key
 * generation, crypto jobs and the garbage collector's helpers run on other threads).
 */
export function cpuSeconds(pid: number | undefined, mainThread = false): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const fields =
      readFileSync(mainThread ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, 'utf8')
        .split(') ')[1]
        ?.split(' ') ?? [];
    // utime and stime are fields 14 and 15 of stat(5), in clock ticks (100 per second on Linux).
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}

/** The machine's busy and idle CPU seconds so far (all CPUs), from /proc/stat; undefined where there is none. */
export function machineSeconds(): { busy: number; idle: number } | undefined {
  try {
    const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal (guest time is counted in user already).
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = fields;
    return { busy: (user + nice + system + irq + softirq + steal) / 100, idle: (idle + iowait) / 100 };
  } catch {
    return undefined;
  }
}

/** The processes whose parent is `pid` (from /proc). */
export function childrenOf(pid: number | undefined): number[] {
  if (pid === undefined) return [];
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // ppid is field 4 of stat(5), the second after the command's closing parenthesis.
      const parent = Number(readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.split(' ')[1]);
      if (parent === pid) children.push(Number(entry));
    } catch {
      // gone since the listing
    }
  }
  return children;
}

const sumOf = (values: Array<number | undefined>): number | undefined =>
  values.reduce<number | undefined>((a, v) => (a === undefined || v === undefined ? undefined : a + v), 0);

/** CPU seconds used so far by every process named `postgres` (the server and its backends). */
export function postgresSeconds(): number | undefined {
  try {
    let total = 0;
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      let stat: string;
      try {
        stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      } catch {
        continue; // gone since the listing
      }
      if (!stat.includes(' (postgres) ')) continue;
      const fields = stat.split(') ')[1]?.split(' ') ?? [];
      total += (Number(fields[11]) + Number(fields[12])) / 100;
    }
    return total;
  } catch {
    return undefined;
  }
}

/**
 * Runs `work` and adds the CPU milliseconds `pid` spent per operation during it. With
 * BENCH_PERF=1 it also counts the instructions `pid` ran per operation (`perf stat`, user and
 * kernel): unlike time, that count hardly moves with the machine's load, so it is the figure to
 * compare two builds by.
 */
export async function withCpu<T extends { ops: number }>(pid: number | undefined, work: () => Promise<T>): Promise<T & Pick<Measured, PerOp | 'idleShare'>> {
  const perf = process.env['BENCH_PERF'] === '1' && pid !== undefined ? await startPerf(pid) : undefined;
  const record = process.env['BENCH_PERF_RECORD'] && pid !== undefined ? await startPerfRecord(pid, process.env['BENCH_PERF_RECORD']) : undefined;
  const before = cpuSeconds(pid);
  const mainBefore = cpuSeconds(pid, true);
  const machineBefore = machineSeconds();
  const pgBefore = postgresSeconds();
  const children = childrenOf(pid);
  const childrenBefore = sumOf(children.map((c) => cpuSeconds(c)));
  const selfBefore = process.cpuUsage();
  const result = await work();
  const self = process.cpuUsage(selfBefore);
  const childrenAfter = sumOf(children.map((c) => cpuSeconds(c)));
  const pgAfter = postgresSeconds();
  const machineAfter = machineSeconds();
  const after = cpuSeconds(pid);
  const mainAfter = cpuSeconds(pid, true);
  const perOp = (seconds: number) => (seconds * 1000) / result.ops;
  const instructions = await perf?.stop();
  await record?.stop(result.ops);
  return {
    ...result,
    ...(before === undefined || after === undefined ? {} : { cpuMsPerOp: ((after - before) * 1000) / result.ops }),
    ...(mainBefore === undefined || mainAfter === undefined ? {} : { mainThreadCpuMsPerOp: ((mainAfter - mainBefore) * 1000) / result.ops }),
    ...(instructions === undefined ? {} : { instructionsPerOp: Math.round(instructions / result.ops) }),
    ...(machineBefore === undefined || machineAfter === undefined
      ? {}
      : {
          machineCpuMsPerOp: perOp(machineAfter.busy - machineBefore.busy),
          idleShare: (machineAfter.idle - machineBefore.idle) / (machineAfter.idle - machineBefore.idle + machineAfter.busy - machineBefore.busy || 1),
        }),
    ...(pgBefore === undefined || pgAfter === undefined ? {} : { postgresCpuMsPerOp: perOp(pgAfter - pgBefore) }),
    clientCpuMsPerOp: perOp((self.user + self.system) / 1e6),
    ...(children.length === 0 || childrenBefore === undefined || childrenAfter === undefined ? {} : { childCpuMsPerOp: perOp(childrenAfter - childrenBefore) }),
  };
}

async function startPerf(pid: number): Promise<{ stop(): Promise<number | undefined> }> {
  const proc = spawn('perf', ['stat', '-x', ',', '-e', 'instructions', '-p', String(pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<void>((resolve) => proc.on('close', () => resolve()));
  proc.on('error', () => undefined);
  await new Promise((r) => setTimeout(r, 300)); // perf attaches
  return {
    async stop() {
      proc.kill('SIGINT');
      await exited;
      const line = err.split('\n').find((l) => l.includes('instructions'));
      const count = Number(line?.split(',')[0]);
      return Number.isFinite(count) && count > 0 ? count : undefined;
    },
  };
}

let recordings = 0;

/**
 * BENCH_PERF_RECORD=<dir>: a CPU profile of `pid` for exactly this measurement (`perf record -e
 * cpu-clock -g`, which needs no hardware counters), written to <dir>/<pid>-<n>-<ops>ops.data; Node
 * must run with --perf-basic-prof (BENCH_NODE_ARGS) for JavaScript frames to have names.
 */
async function startPerfRecord(pid: number, dir: string): Promise<{ stop(ops: number): Promise<void> }> {
  mkdirSync(dir, { recursive: true });
  const file = `${dir}/${pid}-${++recordings}.data`;
  const proc = spawn('perf', ['record', '-q', '-e', 'cpu-clock', '-F', '2000', '-g', '-p', String(pid), '-o', file], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => proc.on('close', () => resolve()));
  proc.on('error', () => undefined);
  await new Promise((r) => setTimeout(r, 300)); // perf attaches
  return {
    async stop(ops: number) {
      proc.kill('SIGINT');
      await exited;
      try {
        renameSync(file, file.replace(/\.data$/, `-${ops}ops.data`));
      } catch {
        // perf could not record (not installed, not permitted): nothing to name.
      }
    },
  };
}

/** Open loop: `rate` requests per second for `seconds`, whatever the answers take. */
export async function fixedRate(rate: number, seconds: number, op: (i: number) => Promise<unknown>) {
  const latencies: number[] = [];
  const total = rate * seconds;
  const started = Date.now();
  const inFlight: Array<Promise<void>> = [];
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / rate;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const t = process.hrtime.bigint();
    inFlight.push(op(i).then(() => void latencies.push(Number(process.hrtime.bigint() - t) / 1e6)));
  }
  await Promise.all(inFlight);
  latencies.sort((a, b) => a - b);
  return { rate, seconds, requests: total, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99) };
}
