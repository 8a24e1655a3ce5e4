/**
 * What "one address" means for the per-address WebSocket cap. An IPv4 client is its address; an
 * IPv6 client is its /64: one host commonly holds a whole /64 (SLAAC, privacy addresses, a
 * provider's delegation), so keying on the exact address would let it fill every slot.
 */
import { isIPv4, isIPv6 } from 'node:net';

/** `203.0.113.7` → `203.0.113.7`; `2001:db8:1:2::7` → `2001:db8:1:2::/64`; `::ffff:1.2.3.4` → `1.2.3.4`. */
export function addressKey(address: string | undefined): string {
  if (address === undefined) return 'unknown';
  // A dual-stack socket shows IPv4 clients as IPv4-mapped IPv6 addresses.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped !== null) return mapped[1] as string;
  if (isIPv4(address)) return address;
  const plain = address.replace(/%.*$/, ''); // a zone (fe80::1%eth0) is not part of the prefix
  if (!isIPv6(plain)) return address;
  return `${expand(plain).slice(0, 4).join(':')}::/64`;
}

/** The eight groups of an IPv6 address, without leading zeros. */
function expand(address: string): string[] {
  let text = address.toLowerCase();
  // An embedded IPv4 tail (::1.2.3.4) is the last two groups.
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4 !== null) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros = tail === undefined ? [] : Array(8 - left.length - right.length).fill('0');
  return [...left, ...zeros, ...right].map((g) => Number.parseInt(g, 16).toString(16));
}
