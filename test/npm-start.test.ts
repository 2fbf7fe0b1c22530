import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { freePort, scratchDatabase, spawnService, watchProcess, type Service } from './support/process.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A data directory the embedded PostgreSQL's `postgres` user can traverse (mkdtemp makes 0700). */
function dataDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'custody-start-'));
  chmodSync(dir, 0o755);
  return dir;
}

/** Every live process by pid → parent pid and state, from /proc. */
function processTable(): Map<number, { ppid: number; state: string }> {
  const table = new Map<number, { ppid: number; state: string }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // pid (comm) state ppid …: comm may hold spaces and parentheses, so read from the last ')'.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const [state = '', ppid = ''] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      table.set(Number(entry), { ppid: Number(ppid), state });
    } catch {
      // gone meanwhile
    }
  }
  return table;
}

/** `pid` and all its descendants. */
function tree(pid: number): number[] {
  const table = processTable();
  const found = [pid];
  for (let i = 0; i < found.length; i++) {
    for (const [child, { ppid }] of table) if (ppid === found[i]) found.push(child);
  }
  return found;
}

const running = (pid: number): boolean => {
  const p = processTable().get(pid);
  return p !== undefined && p.state !== 'Z';
};

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '0.0.0.0', () => server.close(() => resolve(true)));
  });
}

async function within(ms: number, check: () => boolean | Promise<boolean>): Promise<boolean> {
  const end = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** `npm start` in the checkout, as a person runs it, with exactly this environment (plus PATH and HOME). */
function npmStart(env: Record<string, string>): Service {
  const proc = spawn('npm', ['start'], {
    cwd: ROOT,
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/root', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return watchProcess(proc);
}

/** The service's JSON log lines at warn (40) or above. */
const warnings = (output: string): string[] =>
  output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .filter((l) => (JSON.parse(l) as { level: number }).level >= 40);

/** Signals the npm process only, then: every process of the tree it started is gone, and the port is free. */
async function stopsEverything(svc: Service, signal: NodeJS.Signals, port: number): Promise<void> {
  const pids = tree(svc.proc.pid ?? 0);
  // npm, the shell it ran the script with (if any), the API, the signer, and (embedded) PostgreSQL.
  expect(pids.length, svc.output()).to.be.at.least(3);
  process.kill(svc.proc.pid ?? 0, signal);
  await svc.exited;
  const gone = await within(20_000, () => pids.every((p) => !running(p)));
  const left = pids.filter(running);
  // Left behind: stopped here (SIGTERM lets the service stop its own children), then reported.
  for (const p of left) process.kill(p, 'SIGTERM');
  expect(gone, `still running: ${left.join(', ')}\n${svc.output()}`).to.equal(true);
  expect(await within(5_000, () => portFree(port)), `port ${port} is still taken`).to.equal(true);
}

describe('npm start as a process tree', function () {
  this.timeout(180_000);

  it('SIGTERM to the npm pid stops the whole tree and frees the port; the start and the stop log no warning; GET / points to the reference', async () => {
    const db = await scratchDatabase();
    const dir = dataDir();
    const port = await freePort();
    const svc = npmStart({ DATABASE_URL: db.url, DATA_DIR: dir, PORT: String(port) });
    try {
      await svc.waitFor(/listening on http:\/\/localhost:\d+/, 120_000);
      const index = await fetch(`http://127.0.0.1:${port}/`);
      expect(index.status).to.equal(200);
      expect(await index.json()).to.deep.equal({ service: 'custody', reference: '/docs', openapi: '/openapi.json' });
      expect((await fetch(`http://127.0.0.1:${port}/docs`)).status).to.equal(200);
      await stopsEverything(svc, 'SIGTERM', port);
      expect(svc.output()).to.include('"msg":"stopped"');
      expect(warnings(svc.output())).to.deep.equal([]);
    } finally {
      svc.proc.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      await db.drop();
    }
  });

  it('SIGINT to the npm pid stops the whole tree with the embedded PostgreSQL, frees the port, and logs no warning', async () => {
    const dir = dataDir();
    const port = await freePort();
    const svc = npmStart({ DATA_DIR: dir, PORT: String(port), EMBEDDED_PG_PORT: String(await freePort()) });
    try {
      await svc.waitFor(/listening on http:\/\/localhost:\d+/, 120_000);
      expect(tree(svc.proc.pid ?? 0).some((p) => /postgres/.test(readFileSync(`/proc/${p}/cmdline`, 'utf8')))).to.equal(true);
      await stopsEverything(svc, 'SIGINT', port);
      expect(warnings(svc.output())).to.deep.equal([]);
    } finally {
      svc.proc.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the embedded PostgreSQL stops when the API is killed with SIGKILL (no exit hook runs then)', async () => {
    const dir = dataDir();
    const port = await freePort();
    const svc = spawnService({ DATA_DIR: dir, PORT: String(port), EMBEDDED_PG_PORT: String(await freePort()) });
    try {
      await svc.waitFor(/listening on http:\/\/localhost:\d+/, 120_000);
      const pids = tree(svc.proc.pid ?? 0);
      expect(pids.length).to.be.at.least(3);
      svc.proc.kill('SIGKILL');
      await svc.exited;
      const gone = await within(20_000, () => pids.every((p) => !running(p)));
      expect(gone, `still running: ${pids.filter(running).join(', ')}`).to.equal(true);
    } finally {
      svc.proc.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
