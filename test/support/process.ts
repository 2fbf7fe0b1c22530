import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { adminQuery, databaseUrlFor } from './db.js';

export const MAIN = fileURLToPath(new URL('../../src/programs/main.js', import.meta.url));

export interface Service {
  proc: ChildProcess;
  /** stdout and stderr so far. */
  output(): string;
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<void>;
  exited: Promise<number | null>;
}

/** Runs `node dist/src/programs/main.js` as its own process with exactly this environment (plus PATH/HOME). */
export function spawnService(
  env: Record<string, string>,
  main = MAIN,
  nodeArgs: string[] = [],
  as: { uid?: number; gid?: number; cwd?: string; args?: string[] } = {},
): Service {
  const { args = [], ...options } = as;
  const proc = spawn(process.execPath, [...nodeArgs, main, ...args], {
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/root', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...options,
  });
  return watchProcess(proc);
}

/** Collects a child's stdout and stderr and lets a test wait for a line or the exit. */
export function watchProcess(proc: ChildProcess): Service {
  let out = '';
  const waiters: Array<() => void> = [];
  const onData = (chunk: Buffer) => {
    out += chunk.toString('utf8');
    for (const w of waiters.splice(0)) w();
  };
  proc.stdout?.on('data', onData);
  proc.stderr?.on('data', onData);
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  return {
    proc,
    output: () => out,
    exited,
    waitFor(pattern, timeoutMs = 60_000) {
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`timed out waiting for ${String(pattern)}; output:\n${out}`)), timeoutMs);
        const check = () => {
          if (pattern.test(out)) {
            clearTimeout(timer);
            resolve();
          } else if (proc.exitCode !== null) {
            clearTimeout(timer);
            reject(new Error(`process exited (${proc.exitCode}) before ${String(pattern)}; output:\n${out}`));
          } else {
            waiters.push(check);
          }
        };
        proc.on('exit', check);
        check();
      });
    },
  };
}

export { freePort } from './wait.js';

/** An empty database on the machine's PostgreSQL for one process test; `drop` removes it. */
export async function scratchDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `custody_scratch_${Date.now()}_${Math.floor(Math.random() * 1e6)}`;
  await adminQuery(`CREATE DATABASE ${name}`);
  return { url: databaseUrlFor(name), drop: () => adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}
