import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { readChains, type ChainConfig } from '../../../src/platform/eth/chains.js';
import { ChainRpc, RpcUnavailable } from '../../../src/platform/eth/rpc.js';
import { createLogger } from '../../../src/platform/logging/logger.js';
import { startAnvil, startFaultProxy, type Anvil, type FaultProxy } from '../../support/anvil.js';
import { freePort } from '../../support/process.js';
import { sink } from '../../support/log.js';

/** A logger whose lines are kept, to read what a failing URL left in them. */
function capturedLog(): { log: ReturnType<typeof createLogger>; text: () => string; reasons: () => unknown[] } {
  const out = sink();
  return { log: createLogger('debug', out.stream), text: out.text, reasons: () => out.lines().map((l) => l['reason']) };
}

const chainOf = (chainId: number, rpcUrls: string[]): ChainConfig => ({
  chainId,
  name: 'local',
  rpcUrls,
  confirmations: 1,
  maxFeePerGas: 10n ** 11n,
  maxPriorityFeePerGas: 5n * 10n ** 9n,
  minPriorityFeePerGas: 10n ** 9n,
  blockTimeMs: 250,
  stuckAfterMs: 750,
  replacementBumpPercent: 12,
  gasMarginPercent: 20,
  queuedTtlMs: 60_000,
  rpcTimeoutMs: 300,
  rpcCooldownMs: 60_000,
});

/** A loopback node of the chain that answers its id, and every other call with `answer`. */
async function serverAnswering(chainId: number, answer: (res: ServerResponse) => void): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const call = JSON.parse(Buffer.concat(chunks).toString()) as { id: number; method: string };
      if (call.method === 'eth_chainId')
        return void res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ jsonrpc: '2.0', id: call.id, result: `0x${chainId.toString(16)}` }));
      answer(res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe('eth: the RPC client of a chain (operator URLs)', function () {
  this.timeout(30_000);
  let anvil: Anvil;
  let proxy: FaultProxy;
  const servers: Server[] = [];

  before(async () => {
    anvil = await startAnvil();
    proxy = await startFaultProxy(anvil.url);
  });
  after(async () => {
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise<void>((r) => s.close(() => r()));
    }
    await proxy?.stop();
    await anvil?.stop();
  });

  it("sends a URL's user-info as Basic authentication and answers through it", async () => {
    proxy.setFaults(() => 'ok');
    const rpc = new ChainRpc(chainOf(anvil.chainId, [proxy.url.replace('http://', 'http://operator:s3cret%21@')]));
    const head = await rpc.call<string>('eth_blockNumber', []);
    expect(head).to.match(/^0x[0-9a-f]+$/);
    expect(proxy.authorization).to.equal(`Basic ${Buffer.from('operator:s3cret!').toString('base64')}`);
    const [a, b] = await rpc.callMany<string>([
      { method: 'eth_chainId', params: [] },
      { method: 'eth_blockNumber', params: [] },
    ]);
    expect(BigInt(a as string)).to.equal(BigInt(anvil.chainId));
    expect(b).to.equal(head);
  });

  it("fails over past timeouts, garbage, 5xx, resets, redirects and oversized answers, sets a refusing URL aside, and logs none of a URL's credentials", async () => {
    const redirect = await serverAnswering(anvil.chainId, (res) => res.writeHead(307, { location: proxy.url }).end());
    // 33 MiB of a JSON string: over the bound, in chunks.
    const huge = await serverAnswering(anvil.chainId, (res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(1024 * 1024, 0x61);
      res.write('{"jsonrpc":"2.0","id":1,"result":"');
      let left = 33;
      const more = () => {
        while (left > 0) {
          left--;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end('"}');
      };
      res.on('error', () => undefined);
      more();
    });
    servers.push(redirect.server, huge.server);
    const withSecret = (url: string, path: string) => `${url.replace('http://', 'http://keyholder:hunter2-pass@')}${path}`;
    // Behind the proxy (the third and fourth URLs), calls other than the id check time out, answer garbage, 502, or reset, in turn; then pass.
    const faults = ['timeout', 'garbage', '502', 'reset'] as const;
    let calls = 0;
    proxy.setFaults((_n, method) => (method === 'eth_chainId' ? 'ok' : (faults[calls++] ?? 'ok')));
    const { log, text, reasons } = capturedLog();
    const urls = [
      withSecret(redirect.url, '/v3/path-key-aaaa'),
      withSecret(huge.url, '/v3/path-key-bbbb'),
      withSecret(proxy.url, '/v3/path-key-cccc'),
      withSecret(proxy.url, '/v3/path-key-dddd'),
    ];
    // A timeout long enough for 33 MiB over loopback on a busy machine: the bound, not the clock, stops that answer.
    const rpc = new ChainRpc(chainOf(anvil.chainId, urls), { log, timeoutMs: 2_000, cooldownMs: 0 });
    let head: string | undefined;
    for (let round = 0; round < 4 && head === undefined; round++) {
      try {
        head = await rpc.call<string>('eth_blockNumber', []);
      } catch (err) {
        expect(err).to.be.instanceOf(RpcUnavailable);
        expect((err as Error).message).to.not.include('hunter2');
      }
    }
    expect(head).to.match(/^0x[0-9a-f]+$/);
    expect(reasons()).to.include.members(['HTTP 307 (redirects are not followed)', 'answer too large', 'timeout', 'not JSON', 'HTTP 502', 'ECONNRESET']);
    for (const secret of ['hunter2', 'keyholder', 'path-key', '127.0.0.1']) expect(text()).to.not.include(secret);
    // A URL that never answers is set aside unlogged until it does; the caller is told no URL answered, with no URL in the message.
    const closed = await freePort();
    const none = new ChainRpc(chainOf(anvil.chainId, [withSecret(`http://127.0.0.1:${closed}`, '/k')]), { log, timeoutMs: 300 });
    const err = await none.call('eth_blockNumber', []).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(RpcUnavailable);
    expect(text()).to.not.include('hunter2');
  });
  it("takes a provider's refusal of the URL (401, 403, 404, whatever its body) for the URL's fault, never for the node's answer", async () => {
    const refusals = await Promise.all(
      [401, 403, 404].map((status) =>
        serverAnswering(anvil.chainId, (res) =>
          res
            .writeHead(status, { 'content-type': 'application/json' })
            .end(JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: -32600, message: 'Must be authenticated!' } })),
        ),
      ),
    );
    servers.push(...refusals.map((r) => r.server));
    proxy.setFaults(() => 'ok');
    const { log, reasons } = capturedLog();
    const rpc = new ChainRpc(chainOf(anvil.chainId, [...refusals.map((r) => r.url), proxy.url]), { log, cooldownMs: 60_000 });
    expect(await rpc.call<string>('eth_blockNumber', [])).to.match(/^0x[0-9a-f]+$/);
    expect(reasons()).to.deep.equal(['HTTP 401', 'HTTP 403', 'HTTP 404']);
    // With no other URL, the call waits for the provider (RpcUnavailable), never fails as the node's refusal (RpcError).
    const alone = new ChainRpc(chainOf(anvil.chainId, [refusals[0]!.url]), { cooldownMs: 0 });
    expect(await alone.call('eth_estimateGas', [{}]).catch((e: unknown) => e)).to.be.instanceOf(RpcUnavailable);
  });

  it('refuses at start a user-info that is not percent-encoded; an encoded one is sent decoded', async () => {
    const problems: string[] = [];
    const config = (url: string) =>
      JSON.stringify([{ chainId: anvil.chainId, name: 'local', rpcUrls: [url], maxFeePerGas: '2000000000', maxPriorityFeePerGas: '1000000000' }]);
    readChains(config('http://operator:50%off@127.0.0.1:1'), problems);
    expect(problems).to.have.length(1);
    expect(problems[0]).to.include('rpcUrls[0]').and.not.include('50%off');
    const fine: string[] = [];
    const [chain] = readChains(config(proxy.url.replace('http://', 'http://operator:50%25off@')), fine);
    expect(fine).to.deep.equal([]);
    proxy.setFaults(() => 'ok');
    await new ChainRpc(chain!).call('eth_blockNumber', []);
    expect(proxy.authorization).to.equal(`Basic ${Buffer.from('operator:50%off').toString('base64')}`);
  });
});
