import { Agent, request } from 'node:http';

export interface LoadReply {
  status: number;
  text: string;
}

/**
 * The load generator's HTTP client: node:http over a keep-alive agent, nothing recorded, the body
 * read as text. The test suite's client (fetch, every answer kept for the conformance check)
 * costs the generator more CPU and memory per request than the servers it measures on these
 * two-core machines; this one keeps the generator's share, and its garbage-collection pauses,
 * out of the figures. The same client drives the service and the bare ceiling.
 */
export class LoadClient {
  readonly #agent: Agent;
  readonly #host: string;
  readonly #port: number;

  constructor(baseUrl: string, maxSockets = 256) {
    const url = new URL(baseUrl);
    this.#host = url.hostname;
    this.#port = Number(url.port);
    // A socket left idle closes here before the server's keep-alive timeout (Node's 5 s) closes it:
    // a request written on a socket the server was closing ended a run with "socket hang up".
    this.#agent = new Agent({ keepAlive: true, maxSockets, timeout: 4_000 });
  }

  post(path: string, body: string, bearer: string): Promise<LoadReply> {
    return new Promise<LoadReply>((resolve, reject) => {
      const req = request(
        {
          host: this.#host,
          port: this.#port,
          path,
          method: 'POST',
          agent: this.#agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), authorization: `Bearer ${bearer}` },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  close(): void {
    this.#agent.destroy();
  }
}
