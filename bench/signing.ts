import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { keccak_256 } from '@noble/hashes/sha3.js';
import { Transaction } from 'ethers';
import { generateKey } from '../keyvault/eth.js';
import { signDigest } from '../keyvault/sign/ecdsa.js';
import { personalDigest } from '../keyvault/sign/message.js';
import { Client } from '../test/support/http.js';
import { freePort, spawnService } from '../test/support/process.js';
import { startStack } from '../test/support/stack.js';
import { startDevVault } from '../test/support/vault.js';
import { BareVault } from './bare-vault.js';
import { LoadClient } from './load.js';
import { BENCH_NODE_ARGS, closedLoop, fixedRate, Slices, withCpu, writeResult, type Measured } from './stats.js';
import { drain } from './topology.js';

/**
 * Signatures per second through the service as a customer's backend asks for them
 * (`POST …/wallets/{id}/rpc`, a signer token, the policy checked, every decision audited), for
 * `personal_sign` and a type-2 transaction, beside a bare loop doing the same crypto per
 * signature in one thread with no I/O: AES-GCM decrypt of a stored key, keccak, noble sign. Then
 * the latency at 100 signatures/s. With Vault: the same service path beside a bare client doing
 * the same transit decrypt per signature, then the noble signature.
 */
const AUDIENCE = 'urn:custody:testnet';
const CONCURRENCY = 32;
const WALLETS = Number(process.env['BENCH_WALLETS'] ?? 32);
/**
 * Signer tokens the requests are spread over, each under its default rate limit (18,000 per
 * minute): the service with its default settings, as a backend fleet with a token per instance.
 */
const TOKENS = Number(process.env['BENCH_TOKENS'] ?? 64);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 5);
const PER_ROUND = Number(process.env['BENCH_PER_ROUND'] ?? 1000);
const CEILING_SECONDS = Number(process.env['BENCH_CEILING_SECONDS'] ?? 1.5);
const WARM_UP = Number(process.env['BENCH_WARM_UP'] ?? 2000);
const RATE = 100;
const RATE_SECONDS = Number(process.env['BENCH_SECONDS'] ?? 10);

const stack = await startStack('bench-signing');
const dataEncryptionKey = randomBytes(32).toString('base64');

const TX = {
  chainId: 8453,
  gas: 21000,
  maxFeePerGas: '1000000000',
  maxPriorityFeePerGas: '1000',
  to: '0x0000000000000000000000000000000000000b0b',
  value: '1000',
};
const POLICY = {
  rules: [
    { name: 'orders', action: 'allow', method: 'personal_sign', conditions: [{ field: 'message', op: 'prefix', value: 'order ' }] },
    { name: 'payments on Base', action: 'allow', method: 'eth_signTransaction', conditions: [{ field: 'chainId', op: 'eq', value: 8453 }] },
  ],
};
type Method = 'personal_sign' | 'eth_signTransaction';
/** What the service signs and the bare loop hashes: the same messages. */
const orderMessage = (i: number): string => `order ${i} approved for shipping`;
const bodyOf = (method: Method, i: number): string =>
  JSON.stringify(method === 'personal_sign' ? { method, params: { message: orderMessage(i) } } : { method, params: { transaction: { ...TX, nonce: i } } });

/** What the bare loops share: a key sealed as the local store seals it, and the digest per method. */
const master = randomBytes(32);
const sealed = (() => {
  const key = generateKey();
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', master, iv);
  cipher.setAAD(Buffer.from('context'));
  const body = Buffer.concat([cipher.update(key.secret), cipher.final()]);
  key.secret.fill(0);
  return { iv, body, tag: cipher.getAuthTag() };
})();
function digestOf(method: Method, i: number): { digest: Uint8Array; after?: () => Uint8Array } {
  if (method === 'personal_sign') return { digest: personalDigest(Buffer.from(orderMessage(i), 'utf8')) };
  const unsigned = Buffer.from(Transaction.from({ ...TX, type: 2, nonce: i }).unsignedSerialized.slice(2), 'hex');
  // The signed transaction's hash: keccak over the serialization with the signature (65 bytes appended stand in for it).
  const withSignature = Buffer.concat([unsigned, Buffer.alloc(65)]);
  return { digest: keccak_256(unsigned), after: () => keccak_256(withSignature) };
}
/** The serializations are made before the loop: the bare loop does the crypto only. */
const prepared = (method: Method) => Array.from({ length: 256 }, (_, i) => digestOf(method, i));

function bareLocal(method: Method, seconds: number): { ops: number; seconds: number } {
  const items = prepared(method);
  let n = 0;
  const end = Date.now() + seconds * 1000;
  const started = process.hrtime.bigint();
  while (Date.now() < end) {
    const decipher = createDecipheriv('aes-256-gcm', master, sealed.iv);
    decipher.setAAD(Buffer.from('context'));
    decipher.setAuthTag(sealed.tag);
    const secret = Buffer.concat([decipher.update(sealed.body), decipher.final()]);
    const item = items[n % items.length];
    if (!item) throw new Error('no item');
    signDigest(item.digest, secret);
    item.after?.();
    secret.fill(0);
    n++;
  }
  return { ops: n, seconds: Number(process.hrtime.bigint() - started) / 1e9 };
}

interface Service {
  url: string;
  /** The API process (ROLE=all: its signer is its child). */
  pid: number | undefined;
  signerTokens: string[];
  paths: string[];
  stop(): Promise<void>;
}

/** The service as `npm start` runs it (ROLE=all, its signer a child), a project with WALLETS users, a policy and a signer token. */
async function startService(env: Record<string, string>): Promise<Service> {
  const port = await freePort();
  const svc = spawnService({ ...stack.serviceEnv(port), DATA_ENCRYPTION_KEY: dataEncryptionKey, ...env }, undefined, BENCH_NODE_ARGS);
  await svc.waitFor(/listening on http/, 120_000);
  drain(svc);
  const url = `http://127.0.0.1:${port}`;
  const operator = new Client(url, stack.operatorToken);
  const iss = await stack.idp.issuer();
  const org = await operator.post('/api/v1/organisations', { name: `bench ${Date.now()}` });
  const project = await operator.post(`/api/v1/organisations/${org.body.id}/projects`, { name: 'signing', issuer: iss.issuer });
  const projectId = project.body.id;
  const paths: string[] = [];
  for (let i = 0; i < WALLETS; i++) {
    const jwt = await iss.sign({ email: `user${i}@bench.example.com` }, { audience: AUDIENCE, expiresIn: '1h' });
    const signin = await operator.post('/api/v1/signin', { key: project.body.projectKey }, { token: jwt });
    if (signin.status !== 200) throw new Error(`sign-in: ${signin.status} ${signin.text}`);
    paths.push(`/api/v1/project/${projectId}/wallets/${signin.body.walletId}/rpc`);
  }
  const put = await operator.put(`/api/v1/project/${projectId}/policy`, POLICY);
  if (put.status !== 201) throw new Error(`policy: ${put.status} ${put.text}`);
  const signerTokens: string[] = [];
  for (let i = 0; i < TOKENS; i++) {
    const token = await operator.post(`/api/v1/organisations/${org.body.id}/tokens`, { name: `bench ${i}`, role: 'signer', projectId });
    signerTokens.push(token.body.token);
  }
  return {
    url,
    pid: svc.proc.pid,
    signerTokens,
    paths,
    stop: async () => {
      svc.proc.kill('SIGTERM');
      await svc.exited;
    },
  };
}

interface Round {
  ceiling: number;
  perSecond: number;
  ratio: number;
}
type MethodResult = Measured & {
  ceiling: number;
  ratio: number;
  goal: number;
  rounds: Round[];
};

const METHODS: Method[] = ['personal_sign', 'eth_signTransaction'];

/**
 * Both methods warmed up first (WARM_UP signatures each: whichever method went first was 15%
 * slower after its own warm-up alone, in both orders), then ROUNDS times, method after method:
 * the ceiling for a slice (the service idle), then PER_ROUND signatures through the service at
 * concurrency 32 (the bench process idle but for its client). Each method's slices totalled, the
 * ratio theirs.
 */
async function saturate(
  service: Service,
  load: LoadClient,
  ceiling: (method: Method) => Promise<{ ops: number; seconds: number }>,
  goal: number,
): Promise<Record<Method, MethodResult>> {
  let next = 0;
  const signer = (method: Method) => async () => {
    const i = next++;
    const reply = await load.post(service.paths[i % service.paths.length] ?? '', bodyOf(method, i), service.signerTokens[i % TOKENS] ?? '');
    if (reply.status !== 200) throw new Error(`${method}: ${reply.status} ${reply.text.slice(0, 300)}`);
  };
  for (const method of METHODS) await closedLoop(WARM_UP, CONCURRENCY, signer(method));
  for (const method of METHODS) await ceiling(method);
  const state = new Map(METHODS.map((m) => [m, { slices: new Slices(), rounds: [] as Round[], topOps: 0, topSeconds: 0 }]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const method of METHODS) {
      const s = state.get(method);
      if (!s) throw new Error(`no state for ${method}`);
      const top = await ceiling(method);
      const run = await withCpu(service.pid, () => closedLoop(PER_ROUND, CONCURRENCY, signer(method), s.slices.latencies));
      s.slices.add(run);
      s.topOps += top.ops;
      s.topSeconds += top.seconds;
      const round = { ceiling: top.ops / top.seconds, perSecond: run.perSecond, ratio: run.perSecond / (top.ops / top.seconds) };
      s.rounds.push(round);
      console.log(
        `  ${method} round ${r + 1}: ceiling ${round.ceiling.toFixed(0)}/s, service ${round.perSecond.toFixed(0)}/s, ratio ${round.ratio.toFixed(2)}`,
      );
    }
  }
  const results = {} as Record<Method, MethodResult>;
  for (const [method, s] of state) {
    const total = s.slices.run();
    const top = s.topOps / s.topSeconds;
    const result: MethodResult = { ...total, ceiling: top, ratio: total.perSecond / top, goal, rounds: s.rounds };
    console.log(
      `${method} @${CONCURRENCY}: ${result.perSecond.toFixed(0)}/s (p50 ${result.p50Ms.toFixed(1)} ms, p99 ${result.p99Ms.toFixed(1)} ms); ceiling ${top.toFixed(0)}/s; ratio ${result.ratio.toFixed(2)} (goal >= ${goal})`,
    );
    const ms = (v: number | undefined) => (v === undefined ? '?' : v.toFixed(2));
    console.log(
      `  CPU ms per signature: API ${ms(result.cpuMsPerOp)}, signer ${ms(result.childCpuMsPerOp)}, PostgreSQL ${ms(result.postgresCpuMsPerOp)}, load client ${ms(result.clientCpuMsPerOp)}, machine ${ms(result.machineCpuMsPerOp)} (idle ${((result.idleShare ?? 0) * 100).toFixed(0)}%); the bare loop ${(1000 / top).toFixed(2)}`,
    );
    results[method] = result;
  }
  return results;
}

async function atRate(service: Service, load: LoadClient, method: Method) {
  const r = await fixedRate(RATE, RATE_SECONDS, async (i) => {
    const reply = await load.post(service.paths[i % service.paths.length] ?? '', bodyOf(method, 1_000_000 + i), service.signerTokens[i % TOKENS] ?? '');
    if (reply.status !== 200) throw new Error(`${method}: ${reply.status}`);
  });
  console.log(`${method} at ${RATE}/s for ${RATE_SECONDS} s: p50 ${r.p50Ms.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(1)} ms (goal p99 <= 15 ms)`);
  return { ...r, goalP99Ms: 15 };
}

const results: Record<string, unknown> = { concurrency: CONCURRENCY, rounds: ROUNDS, perRound: PER_ROUND, wallets: WALLETS, tokens: TOKENS };
try {
  // The local store, the service's default.
  const local = await startService({});
  const load = new LoadClient(local.url);
  try {
    const bare = (method: Method) => Promise.resolve(bareLocal(method, CEILING_SECONDS));
    results['local'] = { ...(await saturate(local, load, bare, 0.5)), atRate: await atRate(local, load, 'personal_sign') };
  } finally {
    load.close();
    await local.stop();
  }

  // A real Vault-API server: the ceiling is a bare client doing the same transit decrypt per signature, then the signature.
  // BENCH_VAULT=0 skips it (profiling the local half alone).
  if (process.env['BENCH_VAULT'] !== '0')
    try {
      const dev = await startDevVault();
      try {
        const approle = dev.setup();
        const vaultService = await startService({ VAULT_ADDR: dev.addr, ...approle });
        const vaultLoad = new LoadClient(vaultService.url);
        const bareVault = new BareVault(dev.addr);
        try {
          await bareVault.login(approle.VAULT_APPROLE_MOUNT, approle.VAULT_ROLE_ID, approle.VAULT_SECRET_ID);
          const key = generateKey();
          const ciphertext = await bareVault.encrypt('custody-transit', 'custody-wallets', 'bench-key', key.secret);
          key.secret.fill(0);
          const bare = async (method: Method) => {
            const items = prepared(method);
            const run = await closedLoop(PER_ROUND, CONCURRENCY, async (i) => {
              const secret = await bareVault.decrypt('custody-transit', 'custody-wallets', 'bench-key', ciphertext);
              const item = items[i % items.length];
              if (!item) throw new Error('no item');
              signDigest(item.digest, secret);
              item.after?.();
              secret.fill(0);
            });
            return { ops: run.ops, seconds: run.seconds };
          };
          results['vault'] = {
            bin: dev.bin,
            ...(await saturate(vaultService, vaultLoad, bare, 0.6)),
            atRate: await atRate(vaultService, vaultLoad, 'personal_sign'),
          };
        } finally {
          bareVault.close();
          vaultLoad.close();
          await vaultService.stop();
        }
      } finally {
        await dev.stop();
      }
    } catch (err) {
      results['vault'] = { error: err instanceof Error ? err.message : String(err) };
      console.log(`vault: not measured (${String(err)})`);
    }
} finally {
  await stack.teardown();
}
console.log(`results: ${writeResult('signing', results)}`);
