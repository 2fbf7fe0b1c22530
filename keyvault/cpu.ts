import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

type Read = (path: string) => string | undefined;

const readOrUndefined: Read = (path) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
};

/**
 * CPUs this process may use: the cgroup's CPU quota (v2 `cpu.max`, else v1 `cfs_quota_us` over
 * `cfs_period_us`), rounded up, never more than the machine has. A container on a large node
 * sees all the node's cores in `availableParallelism()`; its quota is what it really gets.
 */
export function containerCpus(read: Read = readOrUndefined, machine: number = availableParallelism()): number {
  const quota = cgroupQuota(read);
  return quota === undefined ? machine : Math.max(1, Math.min(machine, Math.ceil(quota)));
}

function cgroupQuota(read: Read): number | undefined {
  const v2 = read('/sys/fs/cgroup/cpu.max')?.trim().split(/\s+/);
  if (v2 && v2[0] !== undefined) {
    if (v2[0] === 'max') return undefined;
    return ratio(v2[0], v2[1]);
  }
  const quota = read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us') ?? read('/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us');
  const period = read('/sys/fs/cgroup/cpu/cpu.cfs_period_us') ?? read('/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us');
  return quota === undefined ? undefined : ratio(quota.trim(), period?.trim());
}

function ratio(quota: string, period: string | undefined): number | undefined {
  const q = Number(quota);
  const p = Number(period ?? 100_000);
  return Number.isFinite(q) && q > 0 && Number.isFinite(p) && p > 0 ? q / p : undefined;
}

/** Key-generation threads by default: the CPUs the container may use, less one for the event loop, at least one. */
export const defaultKeygenThreads = (cpus: number = containerCpus()): number => Math.max(1, cpus - 1);
