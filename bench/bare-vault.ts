import { Agent, request } from 'node:http';

/**
 * A bare Vault client for the benchmarks' ceilings: node:http over a keep-alive agent, AppRole
 * login as the signer logs in (so every call pays the same policy check), nothing else. It issues
 * the calls the signer issues per key or per signature, one request per call, no batching.
 */
export class BareVault {
  readonly #agent = new Agent({ keepAlive: true, maxSockets: 64 });
  #token = '';

  constructor(private readonly addr: string) {}

  async login(mount: string, roleId: string, secretId: string): Promise<void> {
    const answer = (await this.call('POST', `/v1/auth/${mount}/login`, { role_id: roleId, secret_id: secretId })) as { auth?: { client_token?: string } };
    this.#token = answer.auth?.client_token ?? '';
    if (!this.#token) throw new Error('AppRole login answered no token');
  }

  call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<unknown> {
    const url = new URL(path, this.addr);
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          method,
          agent: this.#agent,
          headers: { 'x-vault-token': this.#token, ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            if ((res.statusCode ?? 0) >= 300) reject(new Error(`Vault ${method} ${path}: ${res.statusCode} ${text.slice(0, 200)}`));
            else resolve(text ? (JSON.parse(text) as unknown) : undefined);
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }

  async encrypt(mount: string, key: string, context: string, plaintext: Uint8Array): Promise<string> {
    const answer = (await this.call('POST', `/v1/${mount}/encrypt/${key}`, {
      context: Buffer.from(context).toString('base64'),
      plaintext: Buffer.from(plaintext).toString('base64'),
    })) as { data: { ciphertext: string } };
    return answer.data.ciphertext;
  }

  async decrypt(mount: string, key: string, context: string, ciphertext: string): Promise<Uint8Array> {
    const answer = (await this.call('POST', `/v1/${mount}/decrypt/${key}`, { context: Buffer.from(context).toString('base64'), ciphertext })) as {
      data: { plaintext: string };
    };
    return Uint8Array.from(Buffer.from(answer.data.plaintext, 'base64'));
  }

  /** A KV v2 record written once (`cas: 0`), as the signer writes each key. */
  async writeOnce(kvMount: string, path: string, data: Record<string, unknown>): Promise<void> {
    await this.call('POST', `/v1/${kvMount}/data/${path}`, { options: { cas: 0 }, data });
  }

  close(): void {
    this.#agent.destroy();
  }
}
