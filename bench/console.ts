import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { chromium } from 'playwright-core';
import { createDb } from '../src/platform/db/knex.js';
import { migrateLatest } from '../src/platform/db/migrate.js';
import { adminQuery, databaseUrlFor } from '../test/support/db.js';
import { freePort, spawnService } from '../test/support/process.js';
import { startSigner } from '../test/support/signer.js';
import { toolPath } from '../test/support/tools.js';
import { until } from '../test/support/wait.js';
import { percentile, writeResult } from './stats.js';

/**
 * The console's first load (issue 36, docs/console.md): the JavaScript it loads (bytes after gzip)
 * and the time from navigation until its heaviest first page is interactive (the failed deliveries
 * of a project with 10,000 of them, its first page listed and its controls enabled), in Chromium on
 * a fresh browser context each time (no cache), against the API as users run it (ROLE=api, default
 * settings). The baseline, in the same run: a bare static page of one table, from a bare Node server.
 */
const LOADS = Number(process.env['BENCH_LOADS'] ?? 20);
const FAILED = Number(process.env['BENCH_FAILED_DELIVERIES'] ?? 10_000);

const name = `custody_bench_console_${Date.now()}`;
await adminQuery(`CREATE DATABASE ${name}`);
const url = databaseUrlFor(name);
const db = createDb({ url, poolMax: 4 });
const signer = await startSigner();
const operatorToken = `sk_test_${randomBytes(24).toString('base64url')}`;
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const bare = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end(
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>bare</title></head><body><main><h1>Failed deliveries</h1><table><caption>Failed deliveries</caption><tbody>${'<tr><td>1</td><td>wallet.created</td><td><button>Retry</button></td></tr>'.repeat(25)}</tbody></table></main></body></html>`,
  );
});
await new Promise<void>((resolve) => bare.listen(0, '127.0.0.1', resolve));
const bareUrl = `http://127.0.0.1:${(bare.address() as AddressInfo).port}/`;

let api: ReturnType<typeof spawnService> | undefined;
const browser = await chromium.launch({ executablePath: toolPath('chromium'), args: ['--no-sandbox'] });
try {
  await migrateLatest(db);
  api = spawnService({
    DATABASE_URL: url,
    ROLE: 'api',
    PORT: String(port),
    KEYVAULT_URL: signer.url,
    KEYVAULT_TOKEN: signer.token,
    OPERATOR_TOKEN: operatorToken,
    DATA_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    LOG_LEVEL: 'warn',
  });
  await until('the API to be ready', async () => (await fetch(`${base}/readyz`).catch(() => undefined))?.status === 200, 30_000);
  const call = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${operatorToken}`, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as T;
  };
  // The service's own data: organisations, a project, its tokens, and FAILED failed deliveries.
  for (let i = 0; i < 30; i++) await call('POST', '/api/v1/organisations', { name: `Bench org ${i}` });
  const org = await call<{ id: number }>('POST', '/api/v1/organisations', { name: 'Bench console' });
  const project = await call<{ id: number }>('POST', `/api/v1/organisations/${org.id}/projects`, { name: 'Bench app', issuer: 'https://idp.example.com' });
  for (let i = 0; i < 10; i++) await call('POST', `/api/v1/organisations/${org.id}/tokens`, { name: `token ${i}`, role: 'read' });
  await db.batchInsert(
    'outbox',
    Array.from({ length: FAILED }, (_, i) => ({
      project_id: project.id,
      kind: 'delivery',
      delivery_kind: 'wallet',
      url: 'https://hooks.example.com/wallets',
      payload: JSON.stringify({ walletId: i, walletAddress: `0x${i.toString(16).padStart(40, '0')}`, emailAddress: `user${i}@example.com` }),
      message_id: `msg_bench_console_${i}`,
      status: 'failed',
      attempts: 10,
      last_error: 'HTTP 502',
    })),
    1_000,
  );

  const signIn = await fetch(`${base}/console/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token: operatorToken }),
  });
  const cookie = /custody_session=([^;]+)/.exec(signIn.headers.getSetCookie().join('\n'))?.[1];
  if (!cookie) throw new Error('no session cookie');

  const page = `${base}/console#/webhooks?organisation=${org.id}&project=${project.id}`;
  /** One cold load: a new context (no cache) with the session's cookie; ms until the list is on screen and its pager enabled. */
  async function load(target: string, ready: string): Promise<{ ms: number; jsBytes: number }> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await context.addCookies([{ name: 'custody_session', value: cookie ?? '', url: base, httpOnly: true, sameSite: 'Strict' }]);
    const p = await context.newPage();
    let jsBytes = 0;
    p.on('response', (r) => {
      if (r.request().resourceType() === 'script') void r.body().then((b) => (jsBytes += b.length));
    });
    const started = performance.now();
    await p.goto(target);
    await p.locator(ready).first().waitFor();
    const ms = performance.now() - started;
    await context.close();
    return { ms, jsBytes };
  }
  const consoleReady = 'table:has(caption:text("Failed deliveries")) tbody tr >> nth=24';
  // Warm-up (untimed): the API's and Chromium's first runs.
  for (let i = 0; i < 3; i++) {
    await load(page, consoleReady);
    await load(bareUrl, 'table tbody tr >> nth=24');
  }
  const consoleMs: number[] = [];
  const bareMs: number[] = [];
  let jsBytes = 0;
  for (let i = 0; i < LOADS; i++) {
    // Alternating, so that a disturbance of the machine falls on both.
    const c = await load(page, consoleReady);
    consoleMs.push(c.ms);
    jsBytes = c.jsBytes;
    bareMs.push((await load(bareUrl, 'table tbody tr >> nth=24')).ms);
    process.stdout.write(`load ${i + 1}: console ${c.ms.toFixed(0)} ms, bare page ${bareMs.at(-1)?.toFixed(0)} ms\n`);
  }
  const bundle = readFileSync(fileURLToPath(new URL('../console/app.js', import.meta.url)));
  const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
  const result = {
    loads: LOADS,
    failedDeliveries: FAILED,
    js: { bytes: bundle.length, gzipBytes: gzipSync(bundle, { level: 9 }).length, transferredBytes: jsBytes },
    css: { gzipBytes: gzipSync(readFileSync(fileURLToPath(new URL('../console/app.css', import.meta.url))), { level: 9 }).length },
    interactive: { p50Ms: percentile(sorted(consoleMs), 50), p95Ms: percentile(sorted(consoleMs), 95), maxMs: Math.max(...consoleMs) },
    bare: { p50Ms: percentile(sorted(bareMs), 50), p95Ms: percentile(sorted(bareMs), 95) },
  };
  const file = writeResult('console', { ...result, ratio: result.interactive.p50Ms / result.bare.p50Ms });
  process.stdout.write(
    `console: ${(result.js.gzipBytes / 1024).toFixed(1)} KB of JavaScript (gzip); interactive p50 ${result.interactive.p50Ms.toFixed(0)} ms, p95 ${result.interactive.p95Ms.toFixed(0)} ms (bare page p50 ${result.bare.p50Ms.toFixed(0)} ms); ${file}\n`,
  );
} finally {
  await browser.close();
  api?.proc.kill('SIGTERM');
  await api?.exited;
  await signer.destroy();
  bare.close();
  await db.destroy();
  await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}
