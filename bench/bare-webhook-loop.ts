import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { signatureHeaders } from '../src/domains/webhooks/signing.js';

/**
 * The ceiling for deliveries: a bare loop, in its own process, POSTing the same stored bodies,
 * signed the same way, to the same receiver at the same concurrency, with no database, no
 * queue, no bookkeeping. Like the relay it reuses connections (keep-alive).
 * Prints `{ perSecond, seconds, sent }` as JSON.
 */
const { BODIES_FILE, TARGET, CONCURRENCY, SECRET } = process.env;
const bodies = JSON.parse(readFileSync(BODIES_FILE ?? '', 'utf8')) as Array<{ id: string; body: string }>;
const url = new URL(TARGET ?? '');
const concurrency = Number(CONCURRENCY ?? 8);
// Connections are reused, as the relay's delivery agent does.
const agent = new Agent({ keepAlive: true, scheduling: 'lifo' });

function post(item: { id: string; body: string }): Promise<void> {
  return new Promise((resolve, reject) => {
    const headers = {
      'content-type': 'application/json',
      'user-agent': 'bare-loop',
      ...signatureHeaders(item.id, Math.floor(Date.now() / 1000), item.body, [SECRET ?? '']),
    };
    const req = request(url, { method: 'POST', headers, agent }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode !== undefined && res.statusCode < 300 ? resolve() : reject(new Error(`answered ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(item.body);
  });
}

let next = 0;
const started = process.hrtime.bigint();
await Promise.all(
  Array.from({ length: concurrency }, async () => {
    while (next < bodies.length) {
      const item = bodies[next++];
      if (item) await post(item);
    }
  }),
);
const seconds = Number(process.hrtime.bigint() - started) / 1e9;
process.stdout.write(`${JSON.stringify({ perSecond: bodies.length / seconds, seconds, sent: bodies.length })}\n`);
