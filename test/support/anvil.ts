import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import path from 'node:path';

const require = createRequire(import.meta.url);

/**
 * The anvil binary of `@foundry-rs/anvil` (its platform package carries it; the npm registry is
 * all it comes from): a real EVM node on loopback for the transaction suites.
 */
export function anvilBinary(): string {
  const arch = process.arch === 'x64' ? 'amd64' : process.arch;
  const pkg = require.resolve(`@foundry-rs/anvil-${process.platform}-${arch}/package.json`);
  return path.join(path.dirname(pkg), 'bin', process.platform === 'win32' ? 'anvil.exe' : 'anvil');
}

/** anvil's first dev account (funded at start), for funding wallets in tests. */
export const DEV_ACCOUNT = { address: '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266', key: '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80' };

export interface Anvil {
  url: string;
  chainId: number;
  /** The node's process (benchmarks count its CPU). */
  pid: number | undefined;
  /** A JSON-RPC call; throws the node's error message. */
  rpc<T = unknown>(method: string, params?: unknown[]): Promise<T>;
  /** Sets an address's balance (wei). */
  fund(address: string, wei: bigint): Promise<void>;
  stop(): Promise<void>;
}

/** Starts anvil on a free loopback port: automine unless `blockTime` (seconds) is given. */
export async function startAnvil(options: { chainId?: number; blockTime?: number; args?: string[] } = {}): Promise<Anvil> {
  const chainId = options.chainId ?? 31337;
  const args = [
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--chain-id',
    String(chainId),
    '--silent',
    ...(options.blockTime ? ['--block-time', String(options.blockTime)] : []),
    ...(options.args ?? []),
  ];
  // `--port 0` picks a free port; anvil prints it only when not silent, so the port is chosen here.
  const port = await freePort();
  args[3] = String(port);
  const proc: ChildProcess = spawn(anvilBinary(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  // A node left behind by a run that crashed keeps gigabytes and a core: it goes with this process.
  const reap = () => proc.kill('SIGKILL');
  process.once('exit', reap);
  let out = '';
  proc.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr?.on('data', (c: Buffer) => (out += c.toString()));
  const url = `http://127.0.0.1:${port}`;
  let id = 0;
  const rpc = async <T>(method: string, params: unknown[] = []): Promise<T> => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }),
    });
    const body = (await res.json()) as { result?: T; error?: { message: string } };
    if (body.error) throw new Error(`${method}: ${body.error.message}`);
    return body.result as T;
  };
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      await rpc('eth_chainId');
      break;
    } catch {
      if (Date.now() > deadline || proc.exitCode !== null) throw new Error(`anvil did not start: ${out}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    url,
    chainId,
    pid: proc.pid,
    rpc,
    fund: async (address, wei) => {
      await rpc('anvil_setBalance', [address, `0x${wei.toString(16)}`]);
    },
    stop: async () => {
      process.removeListener('exit', reap);
      if (proc.exitCode !== null) return;
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGKILL');
      await exited;
    },
  };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

export type Fault = 'ok' | '429' | '500' | '502' | 'timeout' | 'garbage' | 'reset';

/**
 * A loopback proxy in front of a node that misbehaves on demand: each request gets `next()`'s
 * fault (answered by the proxy, the node never sees it) or is passed through.
 */
export interface FaultProxy {
  url: string;
  /** What the next requests get; a function of the request's count. */
  setFaults(next: (n: number, method: string) => Fault): void;
  /** Rewrites what the node answers, call by call (a node that answers otherwise than anvil). */
  setAnswers(rewrite: (method: string, result: unknown) => unknown): void;
  /** Requests seen, by fault. */
  seen: Record<Fault, number>;
  /** The Authorization header of the last request, if it had one. */
  readonly authorization: string | undefined;
  stop(): Promise<void>;
}

type RpcMessage = { id?: unknown; method?: unknown; result?: unknown };

/** A node's answer (one call or a batch) with each result rewritten by its call's method. */
function rewritten(request: Buffer, answer: Buffer, rewrite: (method: string, result: unknown) => unknown): Buffer {
  const calls = [JSON.parse(request.toString()) as RpcMessage | RpcMessage[]].flat();
  const parsed = JSON.parse(answer.toString()) as RpcMessage | RpcMessage[];
  const methodOf = new Map(calls.map((c) => [c.id, String(c.method)]));
  const each = (a: RpcMessage): RpcMessage => ('result' in a ? { ...a, result: rewrite(methodOf.get(a.id) ?? '', a.result) } : a);
  return Buffer.from(JSON.stringify(Array.isArray(parsed) ? parsed.map(each) : each(parsed)));
}

export async function startFaultProxy(target: string): Promise<FaultProxy> {
  let next: (n: number, method: string) => Fault = () => 'ok';
  let rewrite: ((method: string, result: unknown) => unknown) | undefined;
  let n = 0;
  const seen: Record<Fault, number> = { ok: 0, '429': 0, '500': 0, '502': 0, timeout: 0, garbage: 0, reset: 0 };
  const hung = new Set<ServerResponse>();
  let authorization: string | undefined;
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    authorization = req.headers.authorization;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      let method: string;
      try {
        const parsed = JSON.parse(body.toString()) as { method?: unknown } | Array<{ method?: unknown }>;
        // A batch is named by its first call.
        const m = Array.isArray(parsed) ? parsed[0]?.method : parsed.method;
        method = typeof m === 'string' ? m : '';
      } catch {
        method = '';
      }
      const fault = next(n++, method);
      seen[fault]++;
      if (fault === '429' || fault === '500' || fault === '502') {
        res.writeHead(Number(fault), { 'content-type': 'text/plain' }).end('provider trouble');
        return;
      }
      if (fault === 'garbage') return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>gateway</html>');
      if (fault === 'reset') return void req.socket.destroy();
      if (fault === 'timeout') return void hung.add(res);
      void fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
        .then(async (r) => {
          let answer: Buffer = Buffer.from(await r.arrayBuffer());
          if (rewrite) answer = rewritten(body, answer, rewrite);
          res.writeHead(r.status, { 'content-type': 'application/json' }).end(answer);
        })
        .catch(() => req.socket.destroy());
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    setFaults: (f) => (next = f),
    setAnswers: (f) => (rewrite = f),
    seen,
    get authorization() {
      return authorization;
    },
    stop: async () => {
      for (const r of hung) r.socket?.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
