import { expect } from 'chai';
import { containerCpus, defaultKeygenThreads } from '../../keyvault/cpu.js';
import { loadSignerConfig } from '../../keyvault/config.js';

/** cgroup files as a container on a 64-core node sees them. */
const files = (entries: Record<string, string>) => (path: string) => entries[path];

describe('keyvault: key-generation threads follow the CPU the container may use, not the node', () => {
  it('reads the cgroup v2 quota, rounding up, never above the machine', () => {
    expect(containerCpus(files({ '/sys/fs/cgroup/cpu.max': '200000 100000\n' }), 64)).to.equal(2);
    expect(containerCpus(files({ '/sys/fs/cgroup/cpu.max': '150000 100000\n' }), 64)).to.equal(2);
    expect(containerCpus(files({ '/sys/fs/cgroup/cpu.max': '50000 100000\n' }), 64)).to.equal(1);
    expect(containerCpus(files({ '/sys/fs/cgroup/cpu.max': '800000 100000\n' }), 4)).to.equal(4);
    // No quota: the machine's cores.
    expect(containerCpus(files({ '/sys/fs/cgroup/cpu.max': 'max 100000\n' }), 64)).to.equal(64);
  });

  it('reads the cgroup v1 quota and period; no cgroup files at all means the machine', () => {
    expect(containerCpus(files({ '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '300000\n', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000\n' }), 64)).to.equal(3);
    expect(
      containerCpus(files({ '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us': '-1\n', '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us': '100000\n' }), 64),
    ).to.equal(64);
    expect(containerCpus(files({}), 8)).to.equal(8);
  });

  it('uses one thread fewer than those CPUs (the event loop has one), at least one; KEYVAULT_KEYGEN_THREADS wins', () => {
    expect(defaultKeygenThreads(2)).to.equal(1);
    expect(defaultKeygenThreads(1)).to.equal(1);
    expect(defaultKeygenThreads(8)).to.equal(7);
    const base = { KEYVAULT_TOKEN: 't'.repeat(40), KEYVAULT_LISTEN: '127.0.0.1:0' };
    expect(loadSignerConfig(base).keygenThreads).to.equal(defaultKeygenThreads());
    expect(loadSignerConfig({ ...base, KEYVAULT_KEYGEN_THREADS: '2' }).keygenThreads).to.equal(2);
  });
});
