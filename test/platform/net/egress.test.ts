import { createServer, type Server } from 'node:http';
import type { LookupAddress } from 'node:dns';
import type { AddressInfo } from 'node:net';
import { isIP } from 'node:net';
import { expect } from 'chai';
import { addressAllowed, type EgressPolicy } from '../../../src/platform/net/egress.js';
import { OutboundError, outboundRequest } from '../../../src/platform/net/outbound.js';
import { startApp, type TestApp } from '../../support/app.js';
import { createTenant } from '../../support/factories.js';

type Verdict = 'public' | 'refused';

/** Address forms and what the rule says of them (IANA special-purpose registries; embedded IPv4 judged as itself). */
const ADDRESSES: Array<[string, Verdict, string]> = [
  ['127.0.0.1', 'refused', 'loopback'],
  ['127.255.255.254', 'refused', 'loopback, end of the block'],
  ['10.0.0.1', 'refused', 'private'],
  ['10.255.255.255', 'refused', 'private, end'],
  ['172.16.0.1', 'refused', 'private'],
  ['172.31.255.255', 'refused', 'private, end'],
  ['172.32.0.1', 'public', 'just past 172.16/12'],
  ['192.168.1.1', 'refused', 'private'],
  ['100.64.0.1', 'refused', 'shared address space (CGN)'],
  ['100.127.255.255', 'refused', 'CGN, end'],
  ['100.128.0.1', 'public', 'just past 100.64/10'],
  ['169.254.169.254', 'refused', 'link local: cloud metadata'],
  ['0.0.0.0', 'refused', 'this host'],
  ['0.1.2.3', 'refused', 'this network'],
  ['192.0.0.1', 'refused', 'IETF protocol assignments'],
  ['192.0.0.9', 'public', 'PCP anycast (globally reachable)'],
  ['192.0.0.10', 'public', 'TURN anycast (globally reachable)'],
  ['192.0.0.171', 'refused', 'NAT64 discovery'],
  ['192.0.2.1', 'refused', 'TEST-NET-1'],
  ['198.51.100.7', 'refused', 'TEST-NET-2'],
  ['203.0.113.9', 'refused', 'TEST-NET-3'],
  ['198.18.0.1', 'refused', 'benchmarking'],
  ['198.19.255.255', 'refused', 'benchmarking, end'],
  ['192.88.99.1', 'refused', '6to4 relay anycast (deprecated)'],
  ['224.0.0.1', 'refused', 'multicast'],
  ['239.255.255.250', 'refused', 'multicast (SSDP)'],
  ['240.0.0.1', 'refused', 'reserved'],
  ['255.255.255.255', 'refused', 'broadcast'],
  ['8.8.8.8', 'public', 'public'],
  ['1.1.1.1', 'public', 'public'],
  ['192.31.196.1', 'public', 'AS112 (globally reachable)'],
  ['::1', 'refused', 'IPv6 loopback'],
  ['::', 'refused', 'IPv6 unspecified'],
  ['::ffff:127.0.0.1', 'refused', 'IPv4-mapped loopback'],
  ['::ffff:7f00:1', 'refused', 'IPv4-mapped loopback, hex'],
  ['::ffff:169.254.169.254', 'refused', 'IPv4-mapped metadata'],
  ['::ffff:8.8.8.8', 'public', 'IPv4-mapped public'],
  ['::127.0.0.1', 'refused', 'IPv4-compatible loopback'],
  ['::a00:1', 'refused', 'IPv4-compatible private, hex'],
  ['::ffff:0:127.0.0.1', 'refused', 'IPv4-translated loopback'],
  ['64:ff9b::127.0.0.1', 'refused', 'NAT64 well-known prefix, loopback'],
  ['64:ff9b::a9fe:a9fe', 'refused', 'NAT64 well-known prefix, metadata'],
  ['64:ff9b::8.8.8.8', 'public', 'NAT64 of a public address'],
  ['64:ff9b:1::a00:1', 'refused', 'local-use NAT64 prefix'],
  ['2002:7f00:1::', 'refused', '6to4 of 127.0.0.1'],
  ['2002:a00:1::1', 'refused', '6to4 of 10.0.0.1'],
  ['2002:808:808::1', 'public', '6to4 of 8.8.8.8'],
  ['2001:0:4136:e378:8000:63bf:80ff:fffe', 'refused', 'Teredo, client 127.0.0.1'],
  ['2001:0:a00:1::f7f7:f7f7', 'refused', 'Teredo, server 10.0.0.1'],
  ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', 'public', 'Teredo, server and client public'],
  ['fe80::1', 'refused', 'link local'],
  ['fc00::1', 'refused', 'unique local'],
  ['fd12:3456::1', 'refused', 'unique local'],
  ['ff02::1', 'refused', 'multicast'],
  ['2001:db8::1', 'refused', 'documentation'],
  ['3fff::1', 'refused', 'documentation (new)'],
  ['100::1', 'refused', 'discard-only'],
  ['2001:2::1', 'refused', 'benchmarking, inside 2001::/23'],
  ['2001:20::1', 'public', 'ORCHIDv2 (globally reachable)'],
  ['5f00::1', 'refused', 'SRv6 SIDs, outside 2000::/3'],
  ['4000::1', 'refused', 'outside 2000::/3'],
  ['2606:4700:4700::1111', 'public', 'public'],
  ['2001:4860:4860::8888', 'public', 'public'],
];

/** URL spellings the WHATWG parser turns into the addresses above (decimal, octal, hex, short forms). */
const SPELLINGS: Array<[string, string]> = [
  ['http://2130706433/', '127.0.0.1'],
  ['http://0x7f000001/', '127.0.0.1'],
  ['http://0177.0.0.1/', '127.0.0.1'],
  ['http://017700000001/', '127.0.0.1'],
  ['http://127.1/', '127.0.0.1'],
  ['http://0x7f.0.0.1/', '127.0.0.1'],
  ['http://3232235777/', '192.168.1.1'],
  ['http://0xA9FEA9FE/', '169.254.169.254'],
  ['http://[0:0:0:0:0:ffff:127.0.0.1]/', '[::ffff:7f00:1]'],
  ['http://[::ffff:7f00:1]/', '[::ffff:7f00:1]'],
  ['http://[::1]/', '[::1]'],
];

/** Names and what they resolve to (injected resolver: nothing leaves this machine). */
const NAMES: Record<string, string[]> = {
  'loopback.egress.test': ['127.0.0.1'],
  'mixed.egress.test': ['8.8.8.8', '10.0.0.1'],
  'v6-loopback.egress.test': ['::1'],
  'mapped-metadata.egress.test': ['::ffff:169.254.169.254'],
  'nat64-metadata.egress.test': ['64:ff9b::a9fe:a9fe'],
  'sixtofour.egress.test': ['2002:a00:1::1'],
  'teredo.egress.test': ['2001:0:4136:e378:8000:63bf:80ff:fffe'],
  'public.egress.test': ['8.8.8.8', '2606:4700:4700::1111'],
};
const resolve = (hostname: string): Promise<LookupAddress[]> => {
  const list = NAMES[hostname];
  if (!list) return Promise.reject(Object.assign(new Error(`no such name ${hostname}`), { code: 'ENOTFOUND' }));
  return Promise.resolve(list.map((address) => ({ address, family: isIP(address) })));
};

const options = (policy: EgressPolicy) => ({ policy, connectTimeoutMs: 2_000, timeoutMs: 2_000, maxBodyBytes: 1024, userAgent: 'egress-test' });

async function refusedOnConnect(url: string, policy: EgressPolicy): Promise<void> {
  try {
    await outboundRequest(new URL(url), { method: 'GET' }, options(policy));
    expect.fail(`${url} was connected to`);
  } catch (err) {
    expect(err, url).to.be.instanceOf(OutboundError);
    expect((err as OutboundError).kind, `${url}: ${(err as Error).message}`).to.equal('ssrf_blocked');
  }
}

describe('egress: outbound requests reach public addresses only, in every environment', function () {
  this.timeout(60_000);
  let server: Server;
  let port = 0;
  let connections = 0;
  before(async () => {
    server = createServer((_req, res) => res.end('ok'));
    server.on('connection', () => connections++);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  it(`judges ${ADDRESSES.length} address forms by the IANA registries, embedded IPv4 as itself`, () => {
    expect(ADDRESSES.length + SPELLINGS.length + Object.keys(NAMES).length).to.be.at.least(60);
    for (const [address, verdict, why] of ADDRESSES) {
      expect(addressAllowed({ allow: [] }, address), `${address} (${why})`).to.equal(verdict === 'public');
    }
  });

  it('refuses every non-public literal, spelling and name on the real connect path, before any packet (loopback server sees nothing)', async () => {
    const policy: EgressPolicy = { allow: [], resolve };
    // The verdict is checked first: a wrongly allowed address would fail here, before any connection is tried.
    for (const [address, verdict] of ADDRESSES) {
      if (verdict === 'public') continue;
      expect(addressAllowed(policy, address), address).to.equal(false);
      await refusedOnConnect(`http://${isIP(address) === 6 ? `[${address}]` : address}:${port}/`, policy);
    }
    for (const [url, normalised] of SPELLINGS) {
      const parsed = new URL(url);
      expect(parsed.hostname, url).to.equal(normalised);
      parsed.port = String(port);
      await refusedOnConnect(parsed.href, policy);
    }
    for (const [name, addresses] of Object.entries(NAMES)) {
      if (addresses.every((a) => addressAllowed(policy, a))) continue;
      await refusedOnConnect(`http://${name}:${port}/`, policy);
    }
    expect(connections, 'connections that reached the loopback server').to.equal(0);
  });

  it('EGRESS_ALLOW_PRIVATE opens what it names, and nothing else: loopback reached by literal, mapped form and name', async () => {
    const policy: EgressPolicy = { allow: ['127.0.0.0/8'], resolve };
    const before = connections;
    for (const url of [`http://127.0.0.1:${port}/`, `http://loopback.egress.test:${port}/`, `http://2130706433:${port}/`]) {
      const res = await outboundRequest(new URL(url), { method: 'GET' }, options(policy));
      expect(res.status, url).to.equal(200);
    }
    expect(connections - before).to.equal(3);
    expect(addressAllowed(policy, '::ffff:127.0.0.1')).to.equal(true);
    expect(addressAllowed(policy, '::1')).to.equal(false);
    await refusedOnConnect(`http://v6-loopback.egress.test:${port}/`, policy);
    await refusedOnConnect(`http://mixed.egress.test:${port}/`, policy);
  });

  describe('at creation and update, in testnet as in production', () => {
    let app: TestApp;
    before(async () => {
      // A testnet deployment with nothing allowed beyond public addresses.
      app = await startApp({ EGRESS_ALLOW_PRIVATE: '' });
    });
    after(() => app.close());

    it('refuses an issuer, a wallet webhook URL and a subscription URL that is not public, saying nothing of ports', async () => {
      const t = await createTenant(app.client);
      const targets = [
        'https://127.0.0.1:8443/',
        'https://[::ffff:7f00:1]/',
        'https://[64:ff9b::a9fe:a9fe]/',
        'https://2130706433/',
        'https://10.0.0.1:22/',
        'https://localhost/',
      ];
      for (const target of targets) {
        const project = await app.client.post(`/api/v1/organisations/${t.org.id}/projects`, {
          name: 'p',
          issuer: target,
        });
        expect(project.status, `issuer ${target}`).to.equal(400);
        expect(project.problem.errors?.[0]?.path).to.equal('/issuer');
        expect(project.problem.errors?.[0]?.message).to.match(/not a public address/);
        expect(project.text).not.to.match(/refused|open|closed|timeout|ECONN/i);
        const hook = await app.client.put(`/api/v1/project/${t.project.id}`, { walletWebhookUrl: target });
        expect(hook.status, `wallet webhook ${target}`).to.equal(400);
        expect(hook.problem.errors?.[0]?.path).to.equal('/walletWebhookUrl');
        const sub = await t.projectAdmin.post(`/api/v1/project/${t.project.id}/webhooks`, { url: target, events: ['*'] });
        expect(sub.status, `subscription ${target}`).to.equal(400);
      }
    });
  });
});
