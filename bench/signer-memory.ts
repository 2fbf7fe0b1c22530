import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { SignerClient } from '../src/platform/signer/client.js';
import { startSigner } from '../test/support/signer.js';
import { startDevVault } from '../test/support/vault.js';
import { keyIdOf, TEST_DEPLOYMENT, TEST_PROJECT } from '../test/support/keys.js';
import { writeResult } from './stats.js';

/**
 * The signer's memory with the chart's settings (its key-generation threads, against a real
 * Vault-API server as the chart always runs it) at 300 concurrent key creations: the peak
 * resident set, sampled from /proc every 10 ms and read back from the kernel's high-water mark,
 * against the chart's memory limit. Goal: under 70% of the limit.
 */
const CONCURRENCY = Number(process.env['BENCH_CONCURRENCY'] ?? 300);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 5);
const GOAL = 0.7;

const values = parseYaml(readFileSync(fileURLToPath(new URL('../../helm/custody/values.yaml', import.meta.url)), 'utf8')) as {
  signer: { keygenThreads: number; resources: { limits: { memory: string } } };
};
const mebibytes = (quantity: string): number => {
  const m = /^(\d+)(Mi|Gi)$/.exec(quantity);
  if (!m) throw new Error(`cannot read the memory limit ${quantity}`);
  return Number(m[1]) * (m[2] === 'Gi' ? 1024 : 1);
};
const limitMiB = mebibytes(values.signer.resources.limits.memory);
/** The chart's setting; BENCH_KEYGEN_THREADS measures another beside it (e.g. what a 16-core node gave by default before). */
const threads = Number(process.env['BENCH_KEYGEN_THREADS'] ?? values.signer.keygenThreads);

/** VmRSS / VmHWM of a process, in MiB. */
function status(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

const vault = await startDevVault();
try {
  const approle = vault.setup();
  const signer = await startSigner({ VAULT_ADDR: vault.addr, ...approle, KEYVAULT_KEYGEN_THREADS: String(threads) });
  const pid = signer.service.proc.pid ?? 0;
  try {
    const client = new SignerClient(signer.url, signer.token, 60_000, TEST_DEPLOYMENT);
    // Warm: the first calls bind the store and compile the code paths.
    await Promise.all(Array.from({ length: 20 }, (_, i) => client.createKey(keyIdOf(`mem-warm-${i}`), `mem-warm-${i}`, TEST_PROJECT)));
    const idleMiB = status(pid, 'VmRSS');
    let sampledPeak = idleMiB;
    const sampler = setInterval(() => {
      sampledPeak = Math.max(sampledPeak, status(pid, 'VmRSS'));
    }, 10);
    const perRound: Array<{ seconds: number; peakMiB: number }> = [];
    try {
      for (let round = 0; round < ROUNDS; round++) {
        const started = process.hrtime.bigint();
        await Promise.all(Array.from({ length: CONCURRENCY }, (_, i) => client.createKey(keyIdOf(`mem-${round}-${i}`), `mem-${round}-${i}`, TEST_PROJECT)));
        perRound.push({ seconds: Number(process.hrtime.bigint() - started) / 1e9, peakMiB: Math.round(sampledPeak * 10) / 10 });
      }
    } finally {
      clearInterval(sampler);
    }
    const hwmMiB = status(pid, 'VmHWM');
    const peakMiB = Math.max(sampledPeak, hwmMiB);
    const ratio = peakMiB / limitMiB;
    console.log(
      `signer (keygenThreads ${threads}, Vault) at ${CONCURRENCY} concurrent creations × ${ROUNDS}: idle ${idleMiB.toFixed(1)} MiB, ` +
        `peak ${peakMiB.toFixed(1)} MiB = ${(ratio * 100).toFixed(1)}% of the chart's ${limitMiB} MiB limit (goal < ${GOAL * 100}%)`,
    );
    // A figure with another thread count goes beside the chart's, never in its place.
    const file = writeResult(threads === values.signer.keygenThreads ? 'signer-memory' : 'signer-memory-compare', {
      concurrency: CONCURRENCY,
      rounds: ROUNDS,
      keygenThreads: threads,
      limitMiB,
      idleMiB,
      peakMiB,
      hwmMiB,
      ratio,
      goal: GOAL,
      perRound,
      vault: vault.bin,
    });
    console.log(`results: ${file}`);
  } finally {
    await signer.destroy();
  }
} finally {
  await vault.stop();
}
