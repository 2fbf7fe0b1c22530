import { randomUUID } from 'node:crypto';
import { generateKey } from '../keyvault/eth.js';
import { projectUid, SignerClient } from '../src/platform/signer/client.js';
import { startSigner } from '../test/support/signer.js';
import { startDevVault } from '../test/support/vault.js';
import { BareVault } from './bare-vault.js';
import { BENCH_NODE_ARGS, closedLoop, Slices, writeResult, type Run } from './stats.js';

/**
 * Keys per second and latency of the signer at concurrency 32, for the local backend and for a
 * real Vault-API server, beside the ceiling: bare key generation + address in one thread, no I/O.
 */
const CONCURRENCY = 32;
const KEYS = Number(process.env['BENCH_KEYS'] ?? 3000);
/** Slices: the ceiling and the signer are measured turn by turn, so a drift of the machine's speed affects both alike. */
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 5);
const CEILING_SECONDS = Number(process.env['BENCH_CEILING_SECONDS'] ?? 1.5);
/** Keys created before measuring, so that both processes' code is compiled (the ceiling warms up too). */
const WARM_UP = Number(process.env['BENCH_WARM_UP'] ?? 2000);

function ceiling(seconds: number): { keys: number; seconds: number } {
  // Warm up the curve's precomputed tables first.
  for (let i = 0; i < 200; i++) generateKey().secret.fill(0);
  let n = 0;
  const end = Date.now() + seconds * 1000;
  const started = process.hrtime.bigint();
  while (Date.now() < end) {
    generateKey().secret.fill(0);
    n++;
  }
  return { keys: n, seconds: Number(process.hrtime.bigint() - started) / 1e9 };
}

interface Round {
  ceiling: number;
  perSecond: number;
  ratio: number;
}

interface BackendResult extends Run {
  ceiling: number;
  ratio: number;
  goal: number;
  rounds: Round[];
}

/**
 * ROUNDS times: the one-thread ceiling for CEILING_SECONDS (the signer idle), then KEYS/ROUNDS
 * keys through the signer at concurrency 32 (the bench process idle but for its client). Keys per
 * second and the ceiling are each totalled over their slices; the ratio is theirs.
 */
async function measure(
  env: Record<string, string>,
  label: string,
  keys: number,
  goal: number,
  ceilingOf: () => Promise<{ keys: number; seconds: number }> = () => Promise.resolve(ceiling(CEILING_SECONDS)),
): Promise<BackendResult> {
  // The signer's settings may be varied from the bench's environment (e.g. KEYVAULT_KEYGEN_THREADS).
  const passed = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[0].startsWith('KEYVAULT_') && e[1] !== undefined));
  // Over a Unix socket, as ROLE=all (`npm start`) runs it beside the API.
  const signer = await startSigner({ ...passed, ...env }, undefined, { unixSocket: true, nodeArgs: BENCH_NODE_ARGS });
  try {
    const client = new SignerClient(signer.url, signer.token, 60_000, randomUUID());
    const project = projectUid(randomUUID());
    await closedLoop(WARM_UP, CONCURRENCY, (i) => client.createKey(randomUUID(), `warm-${label}-${i}`, project));
    const signed = new Slices();
    const rounds: Round[] = [];
    let topKeys = 0;
    let topSeconds = 0;
    const perRound = Math.ceil(keys / ROUNDS);
    for (let r = 0; r < ROUNDS; r++) {
      const top = await ceilingOf();
      const run = await closedLoop(perRound, CONCURRENCY, (i) => client.createKey(randomUUID(), `${label}-${r}-${i}`, project), signed.latencies);
      signed.add(run);
      topKeys += top.keys;
      topSeconds += top.seconds;
      const round = { ceiling: top.keys / top.seconds, perSecond: run.perSecond, ratio: run.perSecond / (top.keys / top.seconds) };
      rounds.push(round);
      console.log(
        `  ${label} round ${r + 1}: ceiling ${round.ceiling.toFixed(0)} keys/s, signer ${round.perSecond.toFixed(0)} keys/s, ratio ${round.ratio.toFixed(2)}`,
      );
    }
    const total = signed.run();
    const top = topKeys / topSeconds;
    return { ...total, ceiling: top, ratio: total.perSecond / top, goal, rounds };
  } finally {
    await signer.destroy();
  }
}

const fmt = (r: BackendResult) =>
  `${r.perSecond.toFixed(0)} keys/s, p50 ${r.p50Ms.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(1)} ms; ceiling ${r.ceiling.toFixed(0)} keys/s; ratio ${r.ratio.toFixed(2)} (goal >= ${r.goal})`;

const local = await measure({}, 'local', KEYS, 0.7);
console.log(`local backend @${CONCURRENCY}: ${fmt(local)}`);

let vault: BackendResult | undefined;
let vaultError: string | undefined;
try {
  const dev = await startDevVault();
  try {
    const approle = dev.setup();
    // Its ceiling: a bare client making the signer's Vault calls per key (transit encrypt, the
    // round-trip decrypt, the write-once KV record) at the same concurrency, with the same AppRole
    // policy, after generating the key: what this Vault server allows on this machine.
    const bare = new BareVault(dev.addr);
    try {
      await bare.login(approle.VAULT_APPROLE_MOUNT, approle.VAULT_ROLE_ID, approle.VAULT_SECRET_ID);
      let n = 0;
      const bareKey = async () => {
        const keyId = `bare-${process.pid}-${n++}`;
        const key = generateKey();
        const ciphertext = await bare.encrypt('custody-transit', 'custody-wallets', keyId, key.secret);
        (await bare.decrypt('custody-transit', 'custody-wallets', keyId, ciphertext)).fill(0);
        key.secret.fill(0);
        await bare.writeOnce('custody-kv', `custody/keys/${keyId}`, { keyId, address: key.address, ciphertext, createdAt: new Date().toISOString() });
      };
      const perRound = Math.ceil(KEYS / ROUNDS);
      vault = await measure({ VAULT_ADDR: dev.addr, ...approle }, 'vault', KEYS, 0.6, async () => {
        const run = await closedLoop(perRound, CONCURRENCY, bareKey);
        return { keys: run.ops, seconds: run.seconds };
      });
    } finally {
      bare.close();
    }
    console.log(`vault backend @${CONCURRENCY} (${dev.bin}): ${fmt(vault)}`);
  } finally {
    await dev.stop();
  }
} catch (err) {
  vaultError = err instanceof Error ? err.message : String(err);
  console.log(`vault backend: not measured (${vaultError})`);
}

const file = writeResult('keyvault', {
  concurrency: CONCURRENCY,
  rounds: ROUNDS,
  local,
  vault: vault ? { ...vault, ceilingOf: 'a bare client making the same Vault calls per key' } : { error: vaultError },
});
console.log(`results: ${file}`);
