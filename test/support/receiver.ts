import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

/** How to answer one request; `hang` never answers (the connection stays open until close()). */
export type Answer = { status: number; headers?: Record<string, string>; body?: string } | 'hang';

/** A real webhook receiver on loopback that records every request and answers as told. */
export class Receiver {
  readonly received: Received[] = [];
  /** Status to answer with. */
  status = 204;
  /** When set, decides each answer instead of `status`. */
  respond: ((r: Received) => Answer) | undefined;
  /** Requests received and not answered (yet). */
  open = 0;
  readonly #waiters: Array<() => void> = [];

  private constructor(
    readonly server: Server,
    readonly url: string,
  ) {}

  static async start(host = '127.0.0.1'): Promise<Receiver> {
    const holder: { r?: Receiver } = {};
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      // A sender that gives up (its timeout) resets the connection: not the receiver's failure.
      req.on('error', () => undefined);
      res.on('error', () => undefined);
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const r = holder.r;
        if (!r) return;
        const received = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
        r.received.push(received);
        const answer: Answer = r.respond ? r.respond(received) : { status: r.status, body: r.status >= 300 ? 'receiver says no' : '' };
        if (answer === 'hang') {
          r.open++;
          res.on('close', () => r.open--);
        } else {
          res.writeHead(answer.status, { 'content-type': 'text/plain', ...answer.headers }).end(answer.body ?? '');
        }
        for (const w of r.#waiters.splice(0)) w();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    holder.r = new Receiver(server, `http://${host}:${(server.address() as AddressInfo).port}/hooks`);
    return holder.r;
  }

  /** Resolves once `count` requests in all have arrived. */
  async waitFor(count: number, timeoutMs = 20_000): Promise<Received[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.received.length < count) {
      if (Date.now() > deadline) throw new Error(`receiver got ${this.received.length} of ${count} requests`);
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
        setTimeout(resolve, 200);
      });
    }
    return this.received;
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}
