import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { createDb } from '../src/platform/db/knex.js';
import { startAnvil, type Anvil } from './support/anvil.js';
import { chainConfig, sendPolicy } from './support/chain.js';
import { spawnService, type Service } from './support/process.js';
import { startSigner, type RunningSigner } from './support/signer.js';
import { startStack, type Stack } from './support/stack.js';
import { freePort, until } from './support/wait.js';

const AUDIENCE = 'urn:custody:testnet';
const SENDS = 1_000;
const WALLETS = 10;
const BOB = '0x0000000000000000000000000000000000000B0b';

/**
 * The service as processes (signer, API, worker), each killed with SIGKILL at random points of a
 * 1,000-send run and started again (docs/transactions.md: what survives a crash).
 */
describe('transactions: SIGKILL of the worker, the API and the signer during 1,000 sends', function () {
  this.timeout(600_000);
  let stack: Stack;
  let anvil: Anvil;
  let signer: RunningSigner;
  const procs: { api?: Service; worker?: Service } = {};
  let env: Record<string, string>;
  let apiPort: number;
  let workerPort: number;

  const startApi = async () => {
    procs.api = spawnService({ ...env, ROLE: 'api', PORT: String(apiPort) });
    await procs.api.waitFor(/listening on http/, 30_000);
  };
  const startWorker = async () => {
    procs.worker = spawnService({ ...env, ROLE: 'worker', PORT: String(workerPort) });
    await procs.worker.waitFor(/worker health and metrics/, 30_000);
  };
  const kill = async (s: Service | undefined) => {
    if (!s || s.proc.exitCode !== null || s.proc.signalCode !== null) return;
    s.proc.kill('SIGKILL');
    await s.exited;
  };

  before(async () => {
    stack = await startStack('tx-crash');
    // Automine, and a block every second besides: anvil's automine leaves transactions that arrive
    // while it mines in its pool until another arrives (a real chain mines its pool).
    anvil = await startAnvil({ blockTime: 1, args: ['--mixed-mining'] });
    const migrate = spawnService({ ROLE: 'migrate', DATABASE_URL: stack.db.url });
    expect(await migrate.exited, migrate.output()).to.equal(0);
    signer = await startSigner();
    apiPort = await freePort();
    workerPort = await freePort();
    env = {
      DATABASE_URL: stack.db.url,
      EGRESS_ALLOW_PRIVATE: '127.0.0.0/8,::1/128',
      KEYVAULT_URL: signer.url,
      KEYVAULT_TOKEN: signer.token,
      DATA_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      OPERATOR_TOKEN: stack.operatorToken,
      OIDC_CA_FILE: stack.caFile,
      CHAINS: JSON.stringify([chainConfig(anvil, { confirmations: 1, stuckAfterMs: 3_000 })]),
      TRANSACTIONS_TICK_MS: '100',
      RATE_LIMIT_TOKEN: '0',
      RATE_LIMIT_PROJECT: '0',
      LOG_LEVEL: 'info',
    };
    await startApi();
    await startWorker();
  });
  after(async () => {
    await kill(procs.api);
    await kill(procs.worker);
    await signer?.destroy();
    await anvil?.stop();
    await stack?.teardown();
  });

  it('every accepted send ends in exactly one terminal state, once on the chain per idempotency key, nonces contiguous, recovered within 30 s', async () => {
    const base = `http://127.0.0.1:${apiPort}`;
    const call = async (method: string, path: string, body: unknown, token: string, headers: Record<string, string> = {}) => {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(20_000),
      });
      const text = await res.text();
      return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
    };
    const op = stack.operatorToken;
    const iss = await stack.idp.issuer();
    const org = await call('POST', '/api/v1/organisations', { name: 'crash' }, op);
    const project = await call('POST', `/api/v1/organisations/${String(org.body['id'])}/projects`, { name: 'p', issuer: iss.issuer }, op);
    const projectId = Number(project.body['id']);
    const token = await call('POST', `/api/v1/organisations/${String(org.body['id'])}/tokens`, { name: 'backend', role: 'signer', projectId }, op);
    const signerToken = String(token.body['token']);
    expect((await call('PUT', `/api/v1/project/${projectId}/policy`, sendPolicy, op)).status).to.equal(201);
    const wallets: Array<{ id: number; address: string }> = [];
    for (let i = 0; i < WALLETS; i++) {
      const jwt = await iss.sign({ email: `crash${i}@example.com` }, { audience: AUDIENCE });
      const s = await call('POST', '/api/v1/signin', { key: project.body['projectKey'] }, jwt);
      expect(s.status, JSON.stringify(s.body)).to.equal(200);
      wallets.push({ id: Number(s.body['walletId']), address: String(s.body['walletAddress']) });
      await anvil.fund(String(s.body['walletAddress']), 10n ** 21n);
    }

    // The killer: one of the three processes at random points of the run (by sends taken, not by
    // time: a faster service finished 1,000 sends before a timed killer had struck four times),
    // started again at once.
    let sending = true;
    let next = 0;
    const kills: string[] = [];
    const points = Array.from({ length: 6 }, () => Math.floor(SENDS * (0.05 + Math.random() * 0.85))).sort((a, b) => a - b);
    const killer = (async () => {
      for (const point of points) {
        while (sending && next < point) await new Promise((r) => setTimeout(r, 20));
        if (!sending) break;
        const which = (['worker', 'api', 'signer'] as const)[Math.floor(Math.random() * 3)]!;
        kills.push(which);
        if (which === 'api') {
          await kill(procs.api);
          await startApi();
        } else if (which === 'worker') {
          await kill(procs.worker);
          await startWorker();
        } else {
          signer.service.proc.kill('SIGKILL');
          await signer.service.exited;
          signer = await startSigner({}, { dataDir: signer.dataDir, token: signer.token, port: Number(new URL(signer.url).port) });
        }
      }
    })();

    // The client: each send with its own Idempotency-Key, retried with the same key until accepted.
    // A key whose request died with the API is held by its lease (409 in progress) for a minute:
    // after a few seconds of that the client moves on; the key is looked up in the database below.
    const accepted = new Map<string, number>();
    const unknown = new Set<string>();
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        while (next < SENDS) {
          // A kill point reached is struck before more sends are taken: a fast service would
          // otherwise take the rest of the run while one process starts again, and pass the points.
          while (sending && kills.length < points.filter((p) => p <= next).length) await new Promise((r) => setTimeout(r, 10));
          if (next >= SENDS) break;
          const i = next++;
          const key = `crash-${i}`;
          const w = wallets[i % WALLETS]!;
          let inProgressSince: number | undefined;
          for (;;) {
            try {
              const r = await call(
                'POST',
                `/api/v1/project/${projectId}/wallets/${w.id}/transactions`,
                { chainId: anvil.chainId, to: BOB, value: String(i + 1) },
                signerToken,
                {
                  'idempotency-key': key,
                },
              );
              if (r.status === 202) {
                accepted.set(key, Number(r.body['id']));
                break;
              }
              expect(r.status, JSON.stringify(r.body)).to.be.oneOf([409, 500, 502, 503]);
              if (r.status === 409) {
                inProgressSince ??= Date.now();
                if (Date.now() - inProgressSince > 3_000) {
                  unknown.add(key);
                  break;
                }
              }
            } catch {
              // The API was killed mid-request: the same key again.
            }
            await new Promise((r) => setTimeout(r, 100));
          }
        }
      }),
    );
    sending = false;
    await killer;
    const lastKill = Date.now();
    expect(kills.length, 'processes were killed during the run').to.be.greaterThan(3);
    expect(accepted.size + unknown.size).to.equal(SENDS);

    const db = createDb({ url: stack.db.url, poolMax: 2 });
    try {
      const open = async () =>
        JSON.stringify(
          await db('transactions').whereNotIn('status', ['confirmed']).groupBy('status', 'waiting').select('status', 'waiting', db.raw('count(*)::int AS n')),
        );
      await until(
        'every send settled',
        async () => {
          const open = await db('transactions')
            .whereNotIn('status', ['confirmed', 'failed', 'replaced', 'cancelled', 'expired'])
            .count<Array<{ count: string }>>('id as count');
          return Number(open[0]?.count) === 0 ? true : undefined;
        },
        30_000,
      ).catch(async (err: unknown) => {
        throw new Error(`${err instanceof Error ? err.message : String(err)}: still open ${await open()}`);
      });
      const recoveredMs = Date.now() - lastKill;
      expect(recoveredMs, 'recovered within 30 s of the last kill').to.be.at.most(30_000);
      const rows = await db('transactions').select<
        Array<{
          id: string;
          kind: string;
          status: string;
          from_address: string;
          nonce: string;
          hash: string;
          request_key: string | null;
        }>
      >('id', 'kind', 'status', 'from_address', 'nonce', 'hash', 'request_key');
      const sends = rows.filter((r) => r.kind === 'send');
      const byKey = new Map<string, number>();
      for (const r of sends) {
        const key = (r.request_key ?? '').split('\n')[1] ?? '';
        byKey.set(key, (byKey.get(key) ?? 0) + 1);
      }
      for (const [key, id] of accepted) {
        expect(byKey.get(key), `${key}: one transaction`).to.equal(1);
        expect(sends.some((r) => Number(r.id) === id)).to.equal(true);
      }
      // A key whose request died mid-way made one transaction or none, never two.
      for (const key of unknown) expect(byKey.get(key) ?? 0, key).to.be.at.most(1);
      expect(sends.length, 'no transaction without its key').to.equal([...byKey.values()].reduce((a, b) => a + b, 0));
      expect(byKey.size).to.equal(sends.length);
      expect(
        sends.filter((r) => r.status !== 'confirmed').map((r) => `${r.id} ${r.status}`),
        'every send confirmed',
      ).to.deep.equal([]);
      for (const w of wallets) {
        const mine = rows.filter((r) => r.from_address === w.address.toLowerCase() && r.status === 'confirmed');
        const count = BigInt(await anvil.rpc<string>('eth_getTransactionCount', [w.address, 'latest']));
        expect(Number(count), `${w.address}: exactly its transactions on the chain`).to.equal(mine.length);
        expect(
          mine.map((r) => Number(r.nonce)).sort((a, b) => a - b),
          'contiguous nonces',
        ).to.deep.equal(Array.from({ length: mine.length }, (_, i) => i));
        for (const r of mine) expect(await anvil.rpc('eth_getTransactionReceipt', [r.hash]), r.hash).to.not.equal(null);
      }
    } finally {
      await db.destroy();
    }
  });
});
