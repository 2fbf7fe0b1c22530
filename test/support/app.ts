import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { Knex } from 'knex';
import { declaredEndpoints, mountedEndpoints } from '../../src/programs/app.js';
import { assembleApi, assembleBackground, type BackgroundParts } from '../../src/programs/assembly.js';
import type { Declaration } from '../../src/access/endpoints/declare.js';
import { loadConfig, type Config } from '../../src/platform/config/config.js';
import { hashSecret, newSecret } from '../../src/platform/crypto/secrets.js';
import type { OutboxRelay } from '../../src/platform/outbox/relay.js';
import { Scheduler } from '../../src/platform/runtime/scheduler.js';
import { createLogger } from '../../src/platform/logging/logger.js';
import type { Lifecycle } from '../../src/platform/runtime/lifecycle.js';
import type { ProjectKeyCache } from '../../src/access/tenancy/key-cache.js';
import { SignerClient } from '../../src/platform/signer/client.js';
import type { CarryOver } from '../../src/platform/signer/carry-over.js';
import { readDeploymentId } from '../../src/platform/db/deployment.js';
import { watchPool, watchRequest, type NestedAcquisitionError } from '../../src/platform/db/held.js';
import { Client } from './http.js';
import { TestIdp } from './idp.js';
import { Receiver } from './receiver.js';
import { sharedSigner } from './signer.js';
import { testDatabaseUrl, testDb } from './db.js';

export interface TestApp {
  url: string;
  client: Client;
  operatorToken: string;
  config: Config;
  db: Knex;
  dataEncryptionKey: Buffer;
  lifecycle: Lifecycle;
  /** Every log line the app wrote. */
  logs: string[];
  relay: OutboxRelay | undefined;
  /**
   * Runs `fn` with the app's background work (relay, schedulers, pruning) stopped and restarts it
   * after: a check that nothing changed must not see a retry or an expiry of another test's rows.
   */
  quiet<T>(fn: () => Promise<T>): Promise<T>;
  /** The app's project-key cache (undefined with PROJECT_CACHE_TTL_MS=0). */
  projectCache: ProjectKeyCache | undefined;
  /** Every API endpoint the app declared (src/access/endpoints/declare.ts). */
  endpoints: readonly Declaration[];
  /** Every endpoint the app mounted, the plain ones (probes, metrics, reference) included. */
  mounted: readonly Declaration[];
  /** Each time a request asked the pool for a connection while it held one (src/platform/db/held.ts); close() fails if any. */
  nested: NestedAcquisitionError[];
  /** The carry-over of an earlier release's signer documents, as the app started it (src/platform/signer/carry-over.ts). */
  carryOver: CarryOver;
  close(): Promise<void>;
}

/** One data encryption key for every app of a run: relays of different apps can open each other's secrets. */
const DATA_ENCRYPTION_KEY = randomBytes(32);

/** The real app on a real port, against the test database (or `db` if given), logs captured. */
export async function startApp(
  env: Record<string, string> = {},
  db: Knex = testDb(),
  options: { relay?: boolean; now?: () => number; operatorToken?: string } = {},
): Promise<TestApp> {
  const operatorToken = options.operatorToken ?? newSecret('sk_test_');
  const signer = sharedSigner();
  const config = loadConfig({
    DATABASE_URL: testDatabaseUrl(),
    LOG_LEVEL: 'debug',
    ROLE: 'api',
    KEYVAULT_URL: signer.url,
    KEYVAULT_TOKEN: signer.token,
    // Suites that load the API are not about rate limits: off unless a test sets them.
    RATE_LIMIT_TOKEN: '0',
    RATE_LIMIT_PROJECT: '0',
    RATE_LIMIT_AUTH_FAILURES: '0',
    // The suites' IdPs and receivers listen on loopback, which outbound requests may not reach otherwise.
    EGRESS_ALLOW_PRIVATE: '127.0.0.0/8,::1/128',
    ...env,
  });
  // DATA_ENCRYPTION_KEY in `env` (the data-key rotation suite), else the run's.
  const dataEncryptionKey = config.dataEncryptionKey ?? DATA_ENCRYPTION_KEY;
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs.push(chunk.toString('utf8'));
      done();
    },
  });
  const log = createLogger(config.logLevel, sink);
  // A database that cannot be reached (the dependency-failure suites) has no deployment id to read: no key can be made there anyway.
  const deploymentId = await readDeploymentId(db).catch(() => randomUUID());
  const signerClient = new SignerClient(config.keyvaultUrl ?? '', config.keyvaultToken ?? '', config.keyvaultTimeoutMs, deploymentId, config.keyvaultTls);
  // The wiring main.ts uses (src/programs/assembly.ts); with Redis, a prefix of its own: test runs share the machine's Redis.
  const parts = assembleApi({
    config: config.redisUrl && env['REDIS_KEY_PREFIX'] === undefined ? { ...config, redisKeyPrefix: `custody-test:${randomBytes(6).toString('hex')}` } : config,
    db,
    databaseUrl: config.databaseUrl ?? testDatabaseUrl(),
    log,
    signer: signerClient,
    operatorTokenHash: hashSecret(operatorToken),
    dataEncryptionKey,
    ...(options.now ? { now: options.now } : {}),
  });
  const { app, lifecycle, projectCache, carryOver } = parts;
  // The background work as main.ts wires it: the relay, the expiry scheduler, outbox pruning.
  let background: BackgroundParts | undefined;
  let scheduler: Scheduler | undefined;
  const assembleIt = () =>
    assembleBackground({
      config,
      db,
      databaseUrl: config.databaseUrl ?? testDatabaseUrl(),
      signer: signerClient,
      dataEncryptionKey,
      log,
      ...(options.now ? { now: options.now } : {}),
    });
  // The worker's periodic tasks run on the process's scheduler, as main.ts runs them.
  const startBackground = async () => {
    background = assembleIt();
    await background.start();
    scheduler = new Scheduler(background.tasks, log);
    scheduler.start();
  };
  const stopBackground = async () => {
    await scheduler?.stop();
    await background?.stop();
  };
  if (options.relay) await startBackground();
  const handle = app.callback();
  // Every request is watched: one that asks the pool for a connection while it holds one fails
  // there, and the suite fails when the app closes (src/platform/db/held.ts).
  watchPool(db);
  const nested: NestedAcquisitionError[] = [];
  const server: Server = createServer((req, res) => {
    watchRequest(
      (err) => nested.push(err),
      () => void handle(req, res),
    );
  });
  // Suites open up to 2,000 connections at once; past Node's default backlog (511) this machine's kernel resets them.
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1', backlog: 4096 }, resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    client: new Client(url, operatorToken),
    operatorToken,
    config,
    db,
    dataEncryptionKey,
    lifecycle,
    logs,
    get relay() {
      return background?.relay;
    },
    quiet: async <T>(fn: () => Promise<T>): Promise<T> => {
      if (!background) return fn();
      await stopBackground();
      try {
        return await fn();
      } finally {
        await startBackground();
      }
    },
    projectCache,
    endpoints: declaredEndpoints(app),
    mounted: mountedEndpoints(app),
    nested,
    carryOver,
    close: async () => {
      await stopBackground();
      await parts.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      if (nested.length > 0) {
        throw new Error(`requests asked the pool for a connection while holding one:\n${nested.map((e) => e.stack ?? e.message).join('\n')}`);
      }
    },
  };
}

/** The app with a real HTTPS IdP (its CA trusted through OIDC_CA_FILE), a webhook receiver and the relay. */
export async function startAppWithIdp(
  env: Record<string, string> = {},
  db?: Knex,
): Promise<{ app: TestApp; idp: TestIdp; receiver: Receiver; dir: string; close: () => Promise<void> }> {
  const idp = await TestIdp.start();
  const dir = mkdtempSync(path.join(tmpdir(), 'custody-idp-'));
  writeFileSync(path.join(dir, 'ca.pem'), idp.caPem);
  const app = await startApp({ OIDC_CA_FILE: path.join(dir, 'ca.pem'), RELAY_POLL_MS: '100', ...env }, db, { relay: true });
  const receiver = await Receiver.start();
  return {
    app,
    idp,
    receiver,
    dir,
    close: async () => {
      await app.close();
      await receiver.close();
      await idp.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
