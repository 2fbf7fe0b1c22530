import { generateKey } from '../keyvault/eth.js';
import { SignerClient } from '../src/signer/client.js';
import { startSigner } from '../test/helpers/signer.js';
import { startDevVault } from '../test/helpers/vault.js';
import { closedLoop, writeResult, type Run } from './stats.js';

/**
 * Keys per second and latency of the signer at concurrency 32, for the local backend and for a
 * real Vault-API server, beside the ceiling: bare key generation + address in one thread, no I/O.
 */
const CONCURRENCY = 32;
const KEYS = Number(process.env['BENCH_KEYS'] ?? 3000);

function ceiling(seconds: number): { perSecond: number } {
  // Warm up the curve's precomputed tables first.
  for (let i = 0; i < 200; i++) generateKey().secret.fill(0);
  let n = 0;
  const end = Date.now() + seconds * 1000;
  const started = process.hrtime.bigint();
  while (Date.now() < end) {
    generateKey().secret.fill(0);
    n++;
  }
  return { perSecond: n / (Number(process.hrtime.bigint() - started) / 1e9) };
}

async function measure(env: Record<string, string>, label: string, keys: number): Promise<Run> {
  const signer = await startSigner(env);
  try {
    const client = new SignerClient(signer.url, signer.token, 60_000);
    await closedLoop(100, CONCURRENCY, (i) => client.createKey(`warm-${label}-${i}`));
    return await closedLoop(keys, CONCURRENCY, (i) => client.createKey(`${label}-${Date.now()}-${i}`));
  } finally {
    await signer.destroy();
  }
}

const fmt = (r: Run) => `${r.perSecond.toFixed(0)} keys/s, p50 ${r.p50Ms.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(1)} ms`;

// The machines are noisy: the ceiling is measured right before each backend, and each ratio uses its own.
const topLocal = ceiling(3);
console.log(`ceiling (one thread, no I/O): ${topLocal.perSecond.toFixed(0)} keys/s`);
const local = await measure({}, 'local', KEYS);
console.log(`local backend @${CONCURRENCY}: ${fmt(local)}  ratio ${(local.perSecond / topLocal.perSecond).toFixed(2)} (goal >= 0.7)`);

let vault: Run | undefined;
let vaultError: string | undefined;
let topVault = topLocal;
try {
  const dev = await startDevVault();
  try {
    const approle = dev.setup();
    topVault = ceiling(3);
    console.log(`ceiling (one thread, no I/O): ${topVault.perSecond.toFixed(0)} keys/s`);
    vault = await measure({ VAULT_ADDR: dev.addr, ...approle }, 'vault', KEYS);
    console.log(`vault backend @${CONCURRENCY} (${dev.bin}): ${fmt(vault)}  ratio ${(vault.perSecond / topVault.perSecond).toFixed(2)} (goal >= 0.4)`);
  } finally {
    await dev.stop();
  }
} catch (err) {
  vaultError = err instanceof Error ? err.message : String(err);
  console.log(`vault backend: not measured (${vaultError})`);
}

const file = writeResult('keyvault', {
  concurrency: CONCURRENCY,
  local: { ...local, ceiling: topLocal.perSecond, ratio: local.perSecond / topLocal.perSecond, goal: 0.7 },
  vault: vault ? { ...vault, ceiling: topVault.perSecond, ratio: vault.perSecond / topVault.perSecond, goal: 0.4 } : { error: vaultError },
});
console.log(`results: ${file}`);
