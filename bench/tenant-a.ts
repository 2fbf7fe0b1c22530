import { randomBytes } from 'node:crypto';
import { Receiver } from '../test/support/receiver.js';
import { LoadClient } from './load.js';

/**
 * bench:fairness's tenant A, in a process of its own as a real tenant's backend would be: its
 * endpoints (a receiver that never answers) and its load (a 1,000-item membership issue and five
 * queued wallets per period). Run in the measuring process, building and parsing A's 1,000-item
 * bodies stalled the clock that stamps B's webhooks, which the service did not cause.
 *
 * Protocol over IPC: sends `{ ready, url }`; takes `{ run }` (what A needs; JWTs come from the
 * parent, which holds the identity provider's key, in batches asked for with `{ need }`), `{ jwts }`
 * and `{ stop }`; answers `{ open }` to `{ poll }` and ends with `{ done }`.
 */
export interface RunA {
  baseUrl: string;
  projectId: number;
  adminToken: string;
  body: string;
  periodMs: number;
}

export type ToA = { run: RunA } | { jwts: string[] } | { poll: true } | { stop: true };
export type FromA = { ready: true; url: string } | { need: number } | { open: number } | { done: { issued: number; wallets: number; hanging: number } };

const send = (m: FromA) => process.send?.(m);
const blackHole = await Receiver.start();
blackHole.respond = () => 'hang';
const jwts: string[] = [];
let stop = false;
let run: Promise<void> | undefined;
let issued = 0;
let wallets = 0;

async function nextJwt(): Promise<string> {
  if (jwts.length < 10) send({ need: 50 });
  while (jwts.length === 0) await new Promise((r) => setTimeout(r, 10));
  return jwts.shift()!;
}

async function load(a: RunA): Promise<void> {
  const client = new LoadClient(a.baseUrl, 16);
  try {
    while (!stop) {
      const items = Array.from({ length: 1_000 }, () => ({ membershipType: 'bench:a', walletAddress: `0x${randomBytes(20).toString('hex')}` }));
      const r = await client.post(`/api/v1/membership/issue?projectId=${a.projectId}`, JSON.stringify(items), a.adminToken);
      if (r.status !== 201) throw new Error(`issue answered ${r.status}: ${r.text}`);
      issued += 1_000;
      for (let i = 0; i < 5; i++) {
        const w = await client.post('/api/v1/wallets/createasync', a.body, await nextJwt());
        if (w.status !== 202) throw new Error(`createasync answered ${w.status}`);
        wallets++;
      }
      await new Promise((r) => setTimeout(r, a.periodMs));
    }
  } finally {
    client.close();
  }
}

process.on('message', (m: ToA) => {
  if ('run' in m) {
    run = load(m.run).catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
  } else if ('jwts' in m) {
    jwts.push(...m.jwts);
  } else if ('poll' in m) {
    send({ open: blackHole.open });
  } else {
    stop = true;
    void (async () => {
      await run;
      const hanging = blackHole.open;
      await blackHole.close();
      send({ done: { issued, wallets, hanging } });
      process.disconnect();
    })();
  }
});
send({ ready: true, url: blackHole.url.replace(/\/hooks$/, '') });
