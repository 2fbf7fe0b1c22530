import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { lookup as dnsLookupAll } from 'node:dns/promises';

/**
 * Where outbound requests (webhooks, OIDC discovery and key sets) may go. In production,
 * loopback, private, link-local (cloud metadata), multicast and reserved addresses are refused,
 * checked on the addresses DNS returns at connect time, so a name cannot be re-pointed after a
 * check. `EGRESS_ALLOW_PRIVATE` lists ranges that customers inside a private network may use.
 */
export interface EgressPolicy {
  /** False in testnet: everything is allowed. */
  restrict: boolean;
  /** CIDRs allowed even though they are private (EGRESS_ALLOW_PRIVATE). */
  allow: string[];
}

const BLOCKED_V4 = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const;
const BLOCKED_V6 = [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const;

const blocked = new BlockList();
for (const [net, prefix] of BLOCKED_V4) blocked.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of BLOCKED_V6) blocked.addSubnet(net, prefix, 'ipv6');

export class EgressBlockedError extends Error {
  readonly code = 'SSRF_BLOCKED';
  constructor(readonly address: string) {
    super(`outbound address ${address} is not allowed`);
  }
}

export function parseCidrs(list: string): { cidrs: string[]; problems: string[] } {
  const cidrs: string[] = [];
  const problems: string[] = [];
  for (const item of list.split(',').map((s) => s.trim()).filter(Boolean)) {
    const [net, bits] = item.split('/');
    const family = net ? isIP(net) : 0;
    const max = family === 6 ? 128 : 32;
    if (!net || family === 0 || bits === undefined || !/^\d{1,3}$/.test(bits) || Number(bits) > max) problems.push(item);
    else cidrs.push(item);
  }
  return { cidrs, problems };
}

export function addressAllowed(policy: EgressPolicy, address: string): boolean {
  if (!policy.restrict) return true;
  const family = isIP(address);
  if (family === 0) return false;
  // IPv4-mapped IPv6 (::ffff:10.0.0.1) is judged as the IPv4 address it carries.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  const ip = mapped ?? address;
  const type = isIP(ip) === 6 ? 'ipv6' : 'ipv4';
  if (!blocked.check(ip, type)) return true;
  const allow = new BlockList();
  for (const cidr of policy.allow) {
    const [net, bits] = cidr.split('/');
    if (net && bits) allow.addSubnet(net, Number(bits), isIP(net) === 6 ? 'ipv6' : 'ipv4');
  }
  return allow.check(ip, type);
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** A `lookup` for http(s).request that refuses addresses the policy does not allow. */
export function egressLookup(policy: EgressPolicy) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      const list = addresses;
      const bad = list.find((a) => !addressAllowed(policy, a.address));
      if (bad) return callback(new EgressBlockedError(bad.address), []);
      if (options.all) return callback(null, list);
      const first = list[0];
      if (!first) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), []);
      callback(null, first.address, first.family);
    });
  };
}

/** For URLs whose host is an IP literal: Node does not call `lookup` for those. */
export function literalHostAllowed(policy: EgressPolicy, hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '');
  return isIP(host) === 0 || addressAllowed(policy, host);
}

/**
 * For a target given at creation (a webhook URL): in production, refuses a host whose addresses
 * the policy does not allow. A host that does not resolve yet is let through: it is checked
 * again at connect time, every time.
 */
export async function targetProblem(policy: EgressPolicy, hostname: string): Promise<string | undefined> {
  if (!policy.restrict) return undefined;
  const host = hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) !== 0) return addressAllowed(policy, host) ? undefined : `points to ${host}, which is not a public address`;
  const addresses = await dnsLookupAll(host, { all: true }).catch((): LookupAddress[] => []);
  const bad = addresses.find((a) => !addressAllowed(policy, a.address));
  return bad ? `resolves to ${bad.address}, which is not a public address` : undefined;
}
