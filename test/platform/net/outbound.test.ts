import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { OutboundError, outboundRequest, trustingAlso } from '../../../src/platform/net/outbound.js';
import { createCa } from '../../support/idp.js';

describe('outbound: TLS with an extra CA', () => {
  let server: Server;
  let url: URL;
  let caPem: string;
  const options = (extraCa?: string) => ({
    policy: { allow: ['127.0.0.0/8'] },
    connectTimeoutMs: 5_000,
    timeoutMs: 5_000,
    maxBodyBytes: 1024,
    userAgent: 'outbound-test',
    ...(extraCa === undefined ? {} : { extraCa }),
  });

  before(async () => {
    const ca = await createCa('outbound test CA');
    caPem = ca.certPem;
    const leaf = await ca.issue();
    server = createServer({ cert: leaf.certPem, key: leaf.keyPem }, (_req, res) => res.writeHead(200, { connection: 'close' }).end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = new URL(`https://127.0.0.1:${(server.address() as AddressInfo).port}/`);
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('trusts the extra CA on every new connection, with one context parsed once per process', async () => {
    for (let i = 0; i < 3; i++) {
      const res = await outboundRequest(url, { method: 'GET' }, options(caPem));
      expect([res.status, res.body.toString()]).to.deep.equal([200, 'ok']);
    }
    // The same context for every connection: the system's CAs and the extra one are not parsed again.
    expect(trustingAlso(caPem)).to.equal(trustingAlso(caPem));
  });

  it('refuses the server without the extra CA (tls), so the context is what made it trusted', async () => {
    const err = await outboundRequest(url, { method: 'GET' }, options()).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(OutboundError);
    expect((err as OutboundError).kind).to.equal('tls');
  });
});
