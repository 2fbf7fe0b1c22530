import { createServer as createHttpServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, request as httpsRequest } from 'node:https';
import { connect, createServer as createTcpServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { rmSync } from 'node:fs';

/**
 * What a cluster gives pods besides their containers, run inside the pods' network namespace
 * (test/support/kubelet.ts starts it there): Services as TCP forwards from their port to the
 * pod's, a stand-in of the Kubernetes API's TokenReview (what Vault's Kubernetes auth asks), and
 * the kubelet's probes. The test process drives it over a Unix socket, which crosses network
 * namespaces: `node pod-infra.js <socket>`.
 */

interface Review {
  username: string;
  uid: string;
  audiences: string[];
}

const socketPath = process.argv[2];
if (!socketPath) throw new Error('usage: pod-infra.js <control socket>');

const servers: Server[] = [];
const reviews = new Map<string, Review>();
let reviewer = '';

const readJson = async (req: IncomingMessage): Promise<Record<string, unknown>> => {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>;
};
const answer = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};

/** A kubelet's httpGet probe: any answer is a status (HTTPS without verifying, as the kubelet does); the body's first 256 KiB beside it. */
function probe(url: string, timeoutMs: number): Promise<{ status?: number; body?: string; error?: string }> {
  return new Promise((resolve) => {
    const send = url.startsWith('https:') ? httpsRequest : httpRequest;
    const req = send(url, { method: 'GET', timeout: timeoutMs, rejectUnauthorized: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        if (body.length < 256 * 1024) body += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => resolve({ error: err.message }));
    req.end();
  });
}

interface Forward {
  listen: { host: string; port: number };
  to: { host: string; port: number };
  /** Terminate TLS with this certificate first (a server that speaks HTTPS in front of one that does not). */
  tls?: { cert: string; key: string };
}
const forwards = new Map<string, { server: Server; spec: string }>();

/** A Service (kube-proxy's job): connections to `listen` go to `to`. The same forward twice is one. */
async function forward(f: Forward): Promise<void> {
  const at = `${f.listen.host}:${f.listen.port}`;
  const spec = JSON.stringify(f);
  const existing = forwards.get(at);
  if (existing?.spec === spec) return;
  if (existing) await new Promise((r) => existing.server.close(r));
  const pipe = (client: Socket) => {
    const upstream = connect(f.to.port, f.to.host);
    client.pipe(upstream).pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close);
    upstream.on('error', close);
  };
  const server = f.tls ? createTlsServer({ cert: f.tls.cert, key: f.tls.key }, pipe) : createTcpServer(pipe);
  servers.push(server);
  forwards.set(at, { server, spec });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(f.listen.port, f.listen.host, () => resolve());
  });
}

/** The TokenReview API as Vault's Kubernetes auth calls it, for the tokens the test issued. */
let reviewing = false;
function tokenReviewApi(port: number, cert: string, key: string): Promise<void> {
  if (reviewing) return Promise.resolve();
  reviewing = true;
  const server = createHttpsServer({ cert, key }, (req, res) => {
    void (async () => {
      if (req.method !== 'POST' || req.url !== '/apis/authentication.k8s.io/v1/tokenreviews') return answer(res, 404, { kind: 'Status', code: 404 });
      if (req.headers.authorization !== `Bearer ${reviewer}`) return answer(res, 401, { kind: 'Status', code: 401, reason: 'Unauthorized' });
      const body = await readJson(req);
      const spec = (body['spec'] ?? {}) as { token?: string; audiences?: string[] };
      const found = spec.token === undefined ? undefined : reviews.get(spec.token);
      const wanted = spec.audiences ?? [];
      const audiences = found ? (wanted.length > 0 ? found.audiences.filter((a) => wanted.includes(a)) : found.audiences) : [];
      const ok = found !== undefined && (wanted.length === 0 || audiences.length > 0);
      answer(res, 201, {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenReview',
        status: ok
          ? { authenticated: true, user: { username: found.username, uid: found.uid, groups: ['system:serviceaccounts', 'system:authenticated'] }, audiences }
          : { authenticated: false, error: 'token not recognised' },
      });
    })().catch((err: unknown) => answer(res, 500, { error: String(err) }));
  });
  servers.push(server);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
}

rmSync(socketPath, { force: true });
const control = createHttpServer((req, res) => {
  void (async () => {
    const body = await readJson(req);
    switch (req.url) {
      case '/probe':
        return answer(res, 200, await probe(String(body['url']), Number(body['timeoutMs'] ?? 2_000)));
      case '/forward':
        await forward(body as unknown as Forward);
        return answer(res, 200, {});
      case '/token-review':
        reviewer = String(body['reviewer']);
        await tokenReviewApi(Number(body['port']), String(body['cert']), String(body['key']));
        return answer(res, 200, {});
      case '/token':
        reviews.set(String(body['token']), body['review'] as Review);
        return answer(res, 200, {});
      default:
        return answer(res, 404, {});
    }
  })().catch((err: unknown) => answer(res, 500, { error: err instanceof Error ? err.message : String(err) }));
});
control.listen(socketPath, () => process.stdout.write('pod-infra ready\n'));
process.on('SIGTERM', () => {
  for (const s of servers) s.close();
  control.close();
  process.exit(0);
});
