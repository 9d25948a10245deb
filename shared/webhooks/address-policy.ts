import { BlockList, isIPv4, isIPv6 } from 'node:net';

/**
 * Addresses a webhook may not reach unless WEBHOOK_ALLOW_PRIVATE is set (SSRF): anything that is not a
 * public unicast address. IPv6 forms that embed an IPv4 address (mapped, IPv4-translated, NAT64, 6to4,
 * ISATAP) are judged by it; Teredo (2001::/32, whose IPv4 inside is obfuscated) is refused outright.
 */
const V4_RANGES: readonly [string, number, string][] = [
  ['0.0.0.0', 8, 'unspecified'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'shared (CGNAT)'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'reserved'],
  ['192.0.2.0', 24, 'documentation'],
  ['192.88.99.0', 24, 'reserved'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
];

const V6_RANGES: readonly [string, number, string][] = [
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['::', 96, 'reserved'], // IPv4-compatible, deprecated
  ['64:ff9b:1::', 48, 'private'], // local-use NAT64
  ['100::', 64, 'reserved'], // discard
  ['2001::', 32, 'Teredo (an IPv4 tunnel)'],
  ['2001:db8::', 32, 'documentation'],
  ['fc00::', 7, 'unique-local'],
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'reserved'], // site-local, deprecated
  ['ff00::', 8, 'multicast'],
];

const lists = (ranges: readonly [string, number, string][], family: 'ipv4' | 'ipv6') =>
  ranges.map(([network, prefix, label]) => {
    const list = new BlockList();
    list.addSubnet(network, prefix, family);
    return { list, label };
  });

const V4 = lists(V4_RANGES, 'ipv4');
const V6 = lists(V6_RANGES, 'ipv6');

/** Why an address may not be reached (`loopback`, `link-local`, …), or null for a public address. */
export function forbiddenAddressKind(address: string): string | null {
  const bare = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  if (isIPv4(bare)) return V4.find((r) => r.list.check(bare, 'ipv4'))?.label ?? null;
  if (!isIPv6(bare)) return 'not an IP address';
  const embedded = embeddedIPv4(ipv6Bytes(bare));
  if (embedded) return forbiddenAddressKind(embedded);
  return V6.find((r) => r.list.check(bare, 'ipv6'))?.label ?? null;
}

/**
 * The IPv4 address inside ::ffff:a.b.c.d (mapped), ::ffff:0:a.b.c.d (IPv4-translated), 64:ff9b::a.b.c.d
 * (NAT64), 2002:aabb:ccdd:: (6to4), or an ISATAP interface id (…:0:5efe:a.b.c.d, …:200:5efe:a.b.c.d).
 */
function embeddedIPv4(b: number[]): string | null {
  const quad = (at: number) => b.slice(at, at + 4).join('.');
  const zeros = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return quad(12);
  if (zeros(0, 8) && b[8] === 0xff && b[9] === 0xff && zeros(10, 12)) return quad(12);
  if ((b[8] === 0x00 || b[8] === 0x02) && b[9] === 0x00 && b[10] === 0x5e && b[11] === 0xfe) return quad(12);
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12)) return quad(12);
  if (b[0] === 0x20 && b[1] === 0x02) return quad(2);
  return null;
}

/** The 16 bytes of a valid IPv6 address (`::` shorthand and a trailing dotted quad allowed). */
function ipv6Bytes(address: string): number[] {
  let text = address.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted[1]!.split('.').map(Number) as [number, number, number, number];
    text = text.slice(0, dotted.index) + ((a << 8) | b).toString(16) + ':' + ((c << 8) | d).toString(16);
  }
  const [head = '', tail] = text.split('::');
  const groups = (part: string) => (part ? part.split(':') : []);
  const left = groups(head);
  const right = tail === undefined ? [] : groups(tail);
  const all = [...left, ...Array(8 - left.length - right.length).fill('0'), ...right];
  return all.flatMap((g) => {
    const n = parseInt(g, 16);
    return [n >> 8, n & 0xff];
  });
}
