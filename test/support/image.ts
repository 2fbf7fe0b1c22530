import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

let layout: string | undefined;

/**
 * The container image's runtime layout (`/app` of the image), rebuilt without a Docker engine by
 * the Dockerfile's own commands (scripts/image-layout.sh), read-only. Built once per test run and
 * shared by the suites that start the image; removed by the root hooks at the end.
 */
export function imageApp(): string {
  layout ??= execFileSync('bash', [path.join(ROOT, 'scripts/image-layout.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
  return layout;
}

export function removeImageLayout(): void {
  if (layout === undefined) return;
  const dir = path.dirname(layout);
  execFileSync('chmod', ['-R', 'u+w', dir]);
  rmSync(dir, { recursive: true, force: true });
  layout = undefined;
}

/** What the image's runtime stage says of how it runs: its environment, entry point, directory and user. */
export interface ImageConfig {
  env: Record<string, string>;
  entrypoint: string[];
  workdir: string;
  user: { uid: number; gid: number };
}

/** Read from the Dockerfile's last stage (and its base image's PATH, which the base sets). */
export function imageConfig(): ImageConfig {
  const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8').replace(/\\\n/g, ' ');
  const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  const nodeVersion = /^FROM node:(\d+\.\d+\.\d+)/m.exec(runtime)?.[1] ?? '';
  // The official node image's own environment.
  const env: Record<string, string> = { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', NODE_VERSION: nodeVersion };
  for (const line of runtime.split('\n').filter((l) => l.startsWith('ENV '))) {
    for (const m of line.slice(4).matchAll(/([A-Z_][A-Z0-9_]*)=("[^"]*"|\S+)/g)) env[m[1] ?? ''] = (m[2] ?? '').replace(/^"|"$/g, '');
  }
  const entrypoint = JSON.parse(/^ENTRYPOINT (\[.*\])$/m.exec(runtime)?.[1] ?? '[]') as string[];
  const workdir = /^WORKDIR (\S+)$/m.exec(runtime)?.[1] ?? '/';
  const [uid, gid] = (/^USER (\d+):(\d+)$/m.exec(runtime)?.slice(1) ?? ['0', '0']).map(Number);
  return { env, entrypoint, workdir, user: { uid: uid ?? 0, gid: gid ?? 0 } };
}
