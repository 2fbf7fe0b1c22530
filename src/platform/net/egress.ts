import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { BlockList, isIP, isIPv4 } from 'node:net';

/**
 * Where outbound requests (webhooks, OIDC discovery and key sets) may go, in every environment:
 * globally routable unicast addresses only (docs/interface.md section 8), judged on the addresses DNS
 * returns at connect time, so a name cannot be re-pointed after a check. An allow-list, not a
 * deny-list: IPv4 must be outside every special-purpose block of the IANA IPv4 registry that is
 * not globally reachable; IPv6 must be global unicast (2000::/3) outside the IPv6 registry's
 * blocks; an IPv4 address carried inside an IPv6 one (mapped, compatible, translated, NAT64,
 * 6to4, Teredo) is judged as that IPv4 address. `EGRESS_ALLOW_PRIVATE` lists ranges that
 * customers inside a private network may use anyway.
 */
export interface EgressPolicy {
  /** CIDRs allowed although not public (EGRESS_ALLOW_PRIVATE). */
  allow: string[];
  /** Name resolution; default: the system's (getaddrinfo, with /etc/hosts). Tests inject their own. */
  resolve?: (hostname: string) => Promise<LookupAddress[]>;
}

/** IANA IPv4 Special-Purpose Address Registry: blocks whose "Globally Reachable" is not True, plus multicast and broadcast. */
const NOT_GLOBAL_V4: Array<[string, number]> = [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // shared address space (CGN)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link local (cloud metadata)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 29], // IETF protocol assignments (DS-Lite etc.)
  ['192.0.0.8', 32], // IPv4 dummy address
  ['192.0.0.11', 32],
  ['192.0.0.12', 30],
  ['192.0.0.16', 28],
  ['192.0.0.32', 27],
  ['192.0.0.64', 26],
  ['192.0.0.128', 26],
  ['192.0.0.192', 26], // the rest of 192.0.0.0/24 but .9 and .10 (PCP and TURN anycast are global)
  ['192.0.2.0', 24], // TEST-NET-1
  ['192.88.99.0', 24], // 6to4 relay anycast (deprecated)
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // TEST-NET-2
  ['203.0.113.0', 24], // TEST-NET-3
  ['224.0.0.0', 4], // multicast: not unicast
  ['240.0.0.0', 4], // reserved, and 255.255.255.255 broadcast
];

/** IANA IPv6 Special-Purpose Address Registry, inside 2000::/3, not globally reachable. */
const NOT_GLOBAL_V6: Array<[string, number]> = [
  ['2001::', 23], // IETF protocol assignments (Teredo, 2001::/32, is judged by its IPv4 addresses first)
  ['2001:db8::', 32], // documentation
  ['3fff::', 20], // documentation
];
/** Inside 2001::/23 but globally reachable per the registry. */
const GLOBAL_INSIDE_V6: Array<[string, number]> = [
  ['2001:1::1', 128], // Port Control Protocol anycast
  ['2001:1::2', 128], // TURN anycast
  ['2001:1::3', 128], // DNS-SD service registration anycast
  ['2001:3::', 32], // AMT
  ['2001:4:112::', 48], // AS112-v6
  ['2001:20::', 28], // ORCHIDv2
  ['2001:30::', 28], // Drone Remote ID
];

const v4Blocked = new BlockList();
for (const [net, bits] of NOT_GLOBAL_V4) v4Blocked.addSubnet(net, bits, 'ipv4');
const v6Global = new BlockList();
v6Global.addSubnet('2000::', 3, 'ipv6');
const v6Blocked = new BlockList();
for (const [net, bits] of NOT_GLOBAL_V6) v6Blocked.addSubnet(net, bits, 'ipv6');
const v6Exceptions = new BlockList();
for (const [net, bits] of GLOBAL_INSIDE_V6) v6Exceptions.addSubnet(net, bits, 'ipv6');

export class EgressBlockedError extends Error {
  readonly code = 'SSRF_BLOCKED';
  constructor(readonly address: string) {
    super(`outbound address ${address} is not a public address`);
  }
}

export function parseCidrs(list: string): { cidrs: string[]; problems: string[] } {
  const cidrs: string[] = [];
  const problems: string[] = [];
  for (const item of list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [net, bits] = item.split('/');
    const family = net ? isIP(net) : 0;
    const max = family === 6 ? 128 : 32;
    if (!net || family === 0 || bits === undefined || !/^\d{1,3}$/.test(bits) || Number(bits) > max) problems.push(item);
    else cidrs.push(item);
  }
  return { cidrs, problems };
}

/** The 16 bytes of an IPv6 address (any spelling Node accepts, including a dotted IPv4 tail). */
export function ipv6Bytes(address: string): Uint8Array | undefined {
  if (isIP(address) !== 6) return undefined;
  let text = address.toLowerCase().replace(/%.*$/, '');
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)?.[1];
  if (tail) {
    const [a = 0, b = 0, c = 0, d = 0] = tail.split('.').map(Number);
    text = `${text.slice(0, -tail.length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', rest] = text.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = rest === undefined || rest === '' ? [] : rest.split(':');
  const groups = rest === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  if (groups.length !== 8) return undefined;
  const bytes = new Uint8Array(16);
  groups.forEach((g, i) => {
    const n = parseInt(g, 16);
    bytes[i * 2] = n >> 8;
    bytes[i * 2 + 1] = n & 0xff;
  });
  return bytes;
}

const v4At = (b: Uint8Array, at: number, xor = 0): string => [0, 1, 2, 3].map((i) => ((b[at + i] ?? 0) ^ xor).toString()).join('.');
const zero = (b: Uint8Array, from: number, to: number) => b.subarray(from, to).every((x) => x === 0);

/**
 * The IPv4 addresses an IPv6 address carries, for the forms that lead to them: IPv4-mapped
 * (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d), the NAT64
 * well-known prefix (64:ff9b::/96), 6to4 (2002:AABB:CCDD::/48) and Teredo (2001::/32: its server
 * and its obfuscated client address). Undefined for an address that carries none.
 */
export function embeddedIpv4(b: Uint8Array): string[] | undefined {
  const w = (i: number) => ((b[i * 2] ?? 0) << 8) | (b[i * 2 + 1] ?? 0);
  if (zero(b, 0, 10) && w(5) === 0xffff) return [v4At(b, 12)]; // mapped
  if (zero(b, 0, 12)) return [v4At(b, 12)]; // compatible, and :: and ::1 (0.0.0.0, 0.0.0.1: refused)
  if (zero(b, 0, 8) && w(4) === 0xffff && w(5) === 0) return [v4At(b, 12)]; // translated
  if (w(0) === 0x64 && w(1) === 0xff9b && zero(b, 4, 12)) return [v4At(b, 12)]; // NAT64 well-known prefix
  if (w(0) === 0x2002) return [v4At(b, 2)]; // 6to4
  if (w(0) === 0x2001 && w(1) === 0) return [v4At(b, 4), v4At(b, 12, 0xff)]; // Teredo
  return undefined;
}

/** The allow-lists as BlockLists, built once per list (the configuration's array), not per check. */
const allowLists = new WeakMap<readonly string[], BlockList>();

function allowedByList(allow: readonly string[], ip: string, type: 'ipv4' | 'ipv6'): boolean {
  if (allow.length === 0) return false;
  let list = allowLists.get(allow);
  if (!list) {
    list = new BlockList();
    for (const cidr of allow) {
      const [net, bits] = cidr.split('/');
      if (net && bits) list.addSubnet(net, Number(bits), isIP(net) === 6 ? 'ipv6' : 'ipv4');
    }
    allowLists.set(allow, list);
  }
  return list.check(ip, type);
}

/** True for a globally routable unicast address (or one EGRESS_ALLOW_PRIVATE names). */
export function addressAllowed(policy: Pick<EgressPolicy, 'allow'>, address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  if (family === 4) return !v4Blocked.check(address, 'ipv4') || allowedByList(policy.allow, address, 'ipv4');
  if (allowedByList(policy.allow, address, 'ipv6')) return true;
  const bytes = ipv6Bytes(address);
  if (!bytes) return false;
  const carried = embeddedIpv4(bytes);
  if (carried) return carried.every((v4) => isIPv4(v4) && addressAllowed(policy, v4));
  if (!v6Global.check(address, 'ipv6')) return false;
  return !v6Blocked.check(address, 'ipv6') || v6Exceptions.check(address, 'ipv6');
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

const systemResolve = (hostname: string): Promise<LookupAddress[]> =>
  new Promise((resolve, reject) => dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))));

/** A `lookup` for http(s).request that refuses every address the policy does not allow, before connecting. */
export function egressLookup(policy: EgressPolicy) {
  const resolve = policy.resolve ?? systemResolve;
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    resolve(hostname).then(
      (list) => {
        const bad = list.find((a) => !addressAllowed(policy, a.address));
        if (bad) return callback(new EgressBlockedError(bad.address), []);
        const usable = options.family === 4 || options.family === 6 ? list.filter((a) => a.family === options.family) : list;
        if (options.all) return callback(null, usable);
        const first = usable[0];
        if (!first) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), []);
        callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, []),
    );
  };
}

/** For URLs whose host is an IP literal: Node does not call `lookup` for those. */
export function literalHostAllowed(policy: EgressPolicy, hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '');
  return isIP(host) === 0 || addressAllowed(policy, host);
}

/**
 * For a target given at creation or update (a webhook URL, an issuer): refuses a host whose
 * addresses the policy does not allow, saying only that it is not a public address (nothing
 * about ports: no packet is sent). A host that does not resolve yet is let through: it is
 * checked again at connect time, every time.
 */
export async function targetProblem(policy: EgressPolicy, hostname: string): Promise<string | undefined> {
  const host = hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) !== 0) return addressAllowed(policy, host) ? undefined : `points to ${host}, which is not a public address`;
  const addresses = await (policy.resolve ?? systemResolve)(host).catch((): LookupAddress[] => []);
  const bad = addresses.find((a) => !addressAllowed(policy, a.address));
  return bad ? `resolves to ${bad.address}, which is not a public address` : undefined;
}
