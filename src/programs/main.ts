import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import type { Knex } from 'knex';
import { assembleApi, assembleBackground, type BackgroundParts } from './assembly.js';
import { ConfigError, loadConfig, roleOf, type Config } from '../platform/config/config.js';
import { hashSecret, newSecret } from '../platform/crypto/secrets.js';
import { startEmbeddedPostgres } from '../platform/db/embedded.js';
import { createDb } from '../platform/db/knex.js';
import { migrateLatest, pendingMigrations } from '../platform/db/migrate.js';
import type { Lifecycle } from '../platform/runtime/lifecycle.js';
import { readOrCreateSecretFile } from '../platform/config/local-secrets.js';
import { createLogger, type Logger } from '../platform/logging/logger.js';
import { apiTokenPrefix } from '../domains/projects/keys.js';
import { startSignerChild } from '../platform/signer/child.js';
import { SignerClient } from '../platform/signer/client.js';
import { bindSigner } from '../platform/signer/bind.js';
import { readDeploymentId } from '../platform/db/deployment.js';
import { startWorkerHttp } from './worker-http.js';
import { Scheduler } from '../platform/runtime/scheduler.js';

/** Composition root: config → dependencies → role → shutdown. */

interface Database {
  db: Knex;
  url: string;
  close(): Promise<void>;
}

async function openDatabase(config: Config, log: Logger): Promise<Database> {
  const embedded = config.databaseUrl === undefined ? await startEmbeddedPostgres(config.dataDir, config.embeddedPgPort, log) : undefined;
  if (embedded) log.info({ port: config.embeddedPgPort, dataDir: config.dataDir }, 'embedded PostgreSQL running (DATABASE_URL unset)');
  const url = config.databaseUrl ?? embedded?.url ?? '';
  const db = createDb({ url, poolMax: config.dbPoolMax, log, preparedStatements: config.dbPreparedStatements });
  return {
    db,
    url,
    close: async () => {
      await db.destroy();
      await embedded?.stop();
    },
  };
}

/** Operator token and data encryption key: from config, or (testnet only) generated once under DATA_DIR. */
function localSecrets(config: Config, log: Logger): { operatorTokenHash: Buffer; dataEncryptionKey: Buffer } {
  let operatorToken = config.operatorToken;
  if (operatorToken === undefined) {
    const file = path.join(config.dataDir, 'operator-token');
    operatorToken = readOrCreateSecretFile(file, () => newSecret(apiTokenPrefix(config.appEnv)));
    log.info({ file }, `operator token (generated, OPERATOR_TOKEN unset) is in ${file}`);
  } else {
    log.info('operator token: from OPERATOR_TOKEN');
  }
  return { operatorTokenHash: hashSecret(operatorToken), dataEncryptionKey: dataEncryptionKeyOf(config) };
}

function dataEncryptionKeyOf(config: Config): Buffer {
  return config.dataEncryptionKey ?? Buffer.from(readOrCreateSecretFile(path.join(config.dataDir, 'data-encryption-key'), randomKey), 'base64');
}

const randomKey = (): string => randomBytes(32).toString('base64');

async function runMigrate(config: Config, log: Logger): Promise<void> {
  const database = await openDatabase(config, log);
  try {
    const applied = await migrateLatest(database.db);
    log.info({ applied }, applied.length > 0 ? `applied ${applied.length} migration(s)` : 'database schema is up to date');
  } finally {
    await database.close();
  }
}

/** Outbound requests go to public addresses only; what is allowed besides, and why, is said at start. */
function logEgress(config: Config, log: Logger): void {
  if (config.egressAllowPrivate.length === 0) return;
  // Loopback on the embedded development start is the expected default (said, not warned);
  // addresses an operator allowed with EGRESS_ALLOW_PRIVATE are worth a warning.
  const level = config.egressAllowSource === 'embedded development start' ? 'info' : 'warn';
  log[level](
    { allow: config.egressAllowPrivate, source: config.egressAllowSource },
    `outbound requests (webhooks, OIDC) may also go to ${config.egressAllowPrivate.join(', ')} (${config.egressAllowSource})`,
  );
}

async function runApi(config: Config, log: Logger): Promise<void> {
  logEgress(config, log);
  const database = await openDatabase(config, log);
  const { db } = database;
  if (config.role === 'all') {
    const applied = await migrateLatest(db);
    if (applied.length > 0) log.info({ applied }, `applied ${applied.length} migration(s)`);
  } else {
    const pending = await pendingMigrations(db);
    if (pending.length > 0) {
      await database.close();
      throw new Error(`the database schema is behind this version (pending: ${pending.join(', ')}); run ROLE=migrate first`);
    }
  }
  const secrets = localSecrets(config, log);
  const child = config.keyvaultUrl === undefined ? await startSignerChild(config, log) : undefined;
  const signer = new SignerClient(
    config.keyvaultUrl ?? child?.url ?? '',
    config.keyvaultToken ?? child?.token ?? '',
    config.keyvaultTimeoutMs,
    await readDeploymentId(db),
    config.keyvaultTls,
  );
  try {
    await bindSigner(signer, log, config.appEnv);
  } catch (err) {
    await child?.stop();
    await database.close();
    throw err;
  }
  const parts = assembleApi({ config, db, databaseUrl: database.url, log, signer, ...secrets });
  const { app, lifecycle } = parts;
  const background = config.role === 'all' || config.relayInApi ? await startBackground(config, database, signer, secrets.dataEncryptionKey, log) : undefined;
  const handle = app.callback();
  const server = createServer((req, res) => {
    void handle(req, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const shownHost = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
  const base = `http://${shownHost}:${config.port}`;
  log.info({ url: base, env: config.appEnv, reference: `${base}/docs` }, `custody API listening on ${base} (${config.appEnv}); API reference at ${base}/docs`);

  // One scheduler for the process: the API's periodic tasks, and the worker's when it runs them too.
  const scheduler = new Scheduler([...parts.tasks, ...(background?.tasks ?? [])], log);
  scheduler.start();

  onShutdown(log, async () => {
    lifecycle.draining = true;
    await scheduler.stop();
    // Let load balancers see /readyz fail before we stop accepting connections.
    await new Promise((r) => setTimeout(r, config.shutdownDelayMs));
    await closeServer(server, config.shutdownTimeoutMs);
    await background?.stop();
    await parts.close();
    await child?.stop();
    await database.close();
  });
}

/** Starts the background work (src/programs/assembly.ts) and says so. */
async function startBackground(config: Config, database: Database, signer: SignerClient, dataEncryptionKey: Buffer, log: Logger): Promise<BackgroundParts> {
  const background = assembleBackground({ config, db: database.db, databaseUrl: database.url, signer, dataEncryptionKey, log });
  await background.start();
  log.info(
    { concurrency: config.relayConcurrency, projectConcurrency: config.relayProjectConcurrency, schedulerIntervalMs: config.schedulerIntervalMs },
    `outbox relay running; periodic tasks: ${background.tasks.map((t) => t.name).join(', ')}`,
  );
  return background;
}

/** ROLE=worker: the outbox relay and the scheduler on their own, beside any number of API processes. */
async function runWorker(config: Config, log: Logger): Promise<void> {
  logEgress(config, log);
  const database = await openDatabase(config, log);
  const pending = await pendingMigrations(database.db);
  if (pending.length > 0) {
    await database.close();
    throw new Error(`the database schema is behind this version (pending: ${pending.join(', ')}); run ROLE=migrate first`);
  }
  const dataEncryptionKey = dataEncryptionKeyOf(config);
  const signer = new SignerClient(
    config.keyvaultUrl ?? '',
    config.keyvaultToken ?? '',
    config.keyvaultTimeoutMs,
    await readDeploymentId(database.db),
    config.keyvaultTls,
  );
  try {
    await bindSigner(signer, log, config.appEnv);
  } catch (err) {
    await database.close();
    throw err;
  }
  const background = await startBackground(config, database, signer, dataEncryptionKey, log);
  const scheduler = new Scheduler(background.tasks, log);
  scheduler.start();
  const lifecycle: Lifecycle = { draining: false };
  const server = await startWorkerHttp({ host: config.host, port: config.port, db: database.db, lifecycle, log });
  onShutdown(log, async () => {
    lifecycle.draining = true;
    await scheduler.stop();
    await background.stop();
    await closeServer(server, 1_000);
    await database.close();
  });
}

/** Stops accepting, lets in-flight requests finish (up to `timeoutMs`), then cuts what is left. */
async function closeServer(server: Server, timeoutMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const timer = setTimeout(() => server.closeAllConnections(), timeoutMs);
  await closed;
  clearTimeout(timer);
}

function onShutdown(log: Logger, drain: () => Promise<void>): void {
  let started = false;
  const handler = (signal: NodeJS.Signals) => {
    if (started) return;
    started = true;
    log.info({ signal }, 'draining');
    drain().then(
      () => {
        log.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        log.error({ err: err instanceof Error ? err.message : String(err) }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
}

async function main(): Promise<void> {
  let config: Config;
  try {
    // The signer is its own program with its own configuration: nothing of the API's is read for it.
    if (roleOf() === 'keyvault') {
      const { runSigner } = await import('../../keyvault/main.js');
      await runSigner();
      return;
    }
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const log = createLogger(config.logLevel);
  switch (config.role) {
    case 'migrate':
      await runMigrate(config, log);
      return;
    case 'api':
    case 'all':
      await runApi(config, log);
      return;
    case 'keyvault':
      throw new Error('unreachable: ROLE=keyvault is dispatched before the API configuration is read');
    case 'worker':
      await runWorker(config, log);
      return;
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`custody: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
