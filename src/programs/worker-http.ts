import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Knex } from 'knex';
import { databaseReachable } from '../platform/db/health.js';
import type { Lifecycle } from '../platform/runtime/lifecycle.js';
import type { Logger } from '../platform/logging/logger.js';
import { registry } from '../platform/logging/metrics.js';

/**
 * The worker's own small listener, for the orchestrator and the scraper only: `/healthz`
 * (alive), `/readyz` (database reachable, not draining) and `/metrics`. No API here.
 */
export async function startWorkerHttp(options: { host: string; port: number; db: Knex; lifecycle: Lifecycle; log: Logger }): Promise<Server> {
  const json = (status: number, body: unknown, headers: Record<string, string> = {}) => ({
    status,
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json', ...headers },
  });
  const server = createServer((req, res) => {
    void (async () => {
      let answer: { status: number; body: string; headers: Record<string, string> };
      const path = (req.url ?? '/').split('?')[0];
      if (req.method !== 'GET') answer = json(405, { status: 'method not allowed' }, { allow: 'GET' });
      else if (path === '/healthz') answer = json(200, { status: 'ok' });
      else if (path === '/readyz') {
        const ready = !options.lifecycle.draining && (await databaseReachable(options.db, 2_000));
        answer = ready ? json(200, { status: 'ready', checks: { database: 'ok' } }) : json(503, { status: 'unavailable' }, { 'retry-after': '5' });
      } else if (path === '/metrics') answer = { status: 200, body: await registry.metrics(), headers: { 'content-type': registry.contentType } };
      else answer = json(404, { status: 'not found' });
      res.writeHead(answer.status, answer.headers).end(answer.body);
    })().catch(() => res.writeHead(500).end());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  options.log.info({ port: (server.address() as AddressInfo).port }, `worker health and metrics on port ${(server.address() as AddressInfo).port}`);
  return server;
}
