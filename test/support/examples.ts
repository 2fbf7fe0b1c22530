import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, until } from './wait.js';

/** The repository's root (the suites run from dist/). */
export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** A documentation example running as a webhook receiver: its stdout lines and stderr as they come. */
export interface Snippet {
  url: string;
  lines: string[];
  stderr: () => string;
  stop(): Promise<void>;
}

/** Starts an example that listens on PORT and prints `listening` once it does. */
export async function startSnippet(command: string, args: string[], env: Record<string, string>): Promise<Snippet> {
  const port = await freePort();
  const child: ChildProcess = spawn(command, args, { cwd: ROOT, env: { ...process.env, ...env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let stderr = '';
  let partial = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    const text = partial + chunk.toString('utf8');
    const parts = text.split('\n');
    partial = parts.pop() ?? '';
    lines.push(...parts);
  });
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await until(`${command} ${args.join(' ')} listening (stderr: ${stderr})`, () => lines.includes('listening') || child.exitCode !== null, 20_000);
  if (child.exitCode !== null) throw new Error(`${command} ${args.join(' ')} exited: ${stderr}`);
  return {
    url: `http://127.0.0.1:${port}/webhooks`,
    lines,
    stderr: () => stderr,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * The Go example (docs/examples/webhooks/go), built once per version of its files into
 * ~/.cache/custody-examples/ (the first build downloads the Standard Webhooks module from the Go
 * module proxy: a few seconds). The build's output is shown only when it fails.
 */
export function goWebhookExample(): string {
  const dir = path.join(ROOT, 'docs/examples/webhooks/go');
  const hash = createHash('sha256');
  for (const f of ['main.go', 'go.mod', 'go.sum']) hash.update(readFileSync(path.join(dir, f)));
  const cache = path.join(process.env['XDG_CACHE_HOME'] ?? path.join(homedir(), '.cache'), 'custody-examples');
  const binary = path.join(cache, `verify-webhook-${hash.digest('hex').slice(0, 16)}`);
  if (existsSync(binary)) return binary;
  mkdirSync(cache, { recursive: true });
  const res = spawnSync('go', ['build', '-o', binary, '.'], { cwd: dir, env: { ...process.env, CGO_ENABLED: '0' }, encoding: 'utf8' });
  if (res.error) throw new Error(`the Go example needs Go: ${res.error.message}`);
  if (res.status !== 0) throw new Error(`go build of the webhook example failed:\n${res.stdout}${res.stderr}`);
  return binary;
}
