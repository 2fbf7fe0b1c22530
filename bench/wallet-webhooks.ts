import type { Receiver } from '../test/support/receiver.js';
import type { LoadClient } from './load.js';
import { fixedRate } from './stats.js';

/**
 * createasync at `rate` per second for `seconds` (one JWT per call, for the e-mail `emails[i]`),
 * then the latency of each wallet-created webhook from its request's sending to its arrival at
 * `receiver` (waiting up to two minutes for the last); the latencies in ms, unsorted.
 */
export async function createAsyncToWebhook(
  load: LoadClient,
  receiver: Receiver,
  run: { rate: number; seconds: number; body: string; jwts: string[]; emails: string[] },
): Promise<number[]> {
  const sentAt = new Map<string, number>();
  const before = receiver.received.length;
  await fixedRate(run.rate, run.seconds, async (i) => {
    sentAt.set(run.emails[i]!, Date.now());
    const r = await load.post('/api/v1/wallets/createasync', run.body, run.jwts[i]!);
    if (r.status !== 202) throw new Error(`createasync answered ${r.status}`);
  });
  const arrivals = new Map<string, number>();
  const deadline = Date.now() + 120_000;
  while (arrivals.size < run.jwts.length && Date.now() < deadline) {
    for (const r of receiver.received.slice(before)) {
      const email = (JSON.parse(r.body) as { emailAddress: string }).emailAddress;
      if (sentAt.has(email) && !arrivals.has(email)) arrivals.set(email, r.at);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return [...arrivals].map(([email, at]) => at - (sentAt.get(email) ?? at));
}
