/**
 * Which `Host` the service answers, against DNS rebinding: a page on `evil.example` whose name
 * the attacker re-points at 127.0.0.1 reaches the service with `Host: evil.example` (and, for a
 * WebSocket, `Origin: http://evil.example`), so comparing Origin with Host alone lets it in. The
 * service answers only the names it is reachable as; an IP-literal Host cannot come from a
 * rebound name and always passes.
 */
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';

/** Why a request's Host is refused: a malformed or repeated one (400), or another name (421). */
export type HostRefusal =
  | { readonly status: 400; readonly why: string; readonly reason: 'bad_host' }
  | { readonly status: 421; readonly why: string; readonly reason: 'host_not_allowed' };

/** A DNS name label: letters, digits and inner hyphens (underscores too: Docker service names). */
const LABEL = /^[a-z\d_]([a-z\d_-]{0,61}[a-z\d_])?$/;

/**
 * `Host` as RFC 9112 allows it: a reg-name, an IPv4 address or a bracketed IPv6 address, then an
 * optional port. Returns the host name (lower case, brackets and a trailing dot removed).
 */
export function hostOf(value: string): string | undefined {
  const m = /^(\[[\da-fA-F:.]+\]|[^:[\]]*)(?::(\d{0,5}))?$/.exec(value);
  if (m === null) return undefined;
  const port = m[2];
  if (port !== undefined && port !== '' && Number(port) > 65535) return undefined;
  const host = (m[1] as string).toLowerCase();
  if (host.startsWith('[')) {
    const ip = host.slice(1, -1);
    return isIP(ip) === 6 ? ip : undefined;
  }
  return isName(host) ? host.replace(/\.$/, '') : undefined;
}

/** `http://a:1/x` → `a:1`; a target that is no URL is left to the target check (400). */
function authorityOf(target: string): string | undefined {
  try {
    return new URL(target).host;
  } catch {
    return undefined;
  }
}

function isName(host: string): boolean {
  if (isIP(host) === 4) return true;
  const labels = host.replace(/\.$/, '').split('.');
  return host.length > 0 && host.length <= 254 && labels.every((l) => LABEL.test(l));
}

/**
 * An allowlist entry: a host name (`desks`, `demo.example.com`), a name with a leading dot for it
 * and every name under it (`.example.com`), or an IP address (which passes anyway).
 */
export function parseAllowedHost(entry: string): string | undefined {
  const value = entry.trim().toLowerCase();
  const unbracketed = /^\[.*\]$/.test(value) ? value.slice(1, -1) : value;
  if (isIP(unbracketed) !== 0) return unbracketed;
  const name = value.startsWith('.') ? value.slice(1) : value;
  if (name === '' || !isName(name) || /^[\d.]+$/.test(name)) return undefined;
  return value.replace(/\.$/, '');
}

export class HostAllowlist {
  readonly #exact = new Set<string>();
  readonly #suffixes: string[] = [];
  /** The entries as given (for the startup line and errors). */
  readonly entries: readonly string[];

  constructor(entries: readonly string[]) {
    this.entries = entries;
    for (const entry of entries) {
      if (entry.startsWith('.')) {
        this.#suffixes.push(entry);
        this.#exact.add(entry.slice(1));
      } else this.#exact.add(entry);
    }
  }

  /** An IP literal, a listed name, or a name under a listed `.suffix`. */
  allows(host: string): boolean {
    return (
      isIP(host) !== 0 || this.#exact.has(host) || this.#suffixes.some((s) => host.endsWith(s))
    );
  }

  /**
   * The request's Host, checked: exactly one, well-formed, allowed. A request without one
   * (HTTP/1.0; Node answers an HTTP/1.1 request without Host with 400 itself) is no browser's.
   */
  refusal(req: IncomingMessage): HostRefusal | undefined {
    let count = 0;
    const raw = req.rawHeaders;
    for (let i = 0; i < raw.length; i += 2) if (raw[i]?.toLowerCase() === 'host') count++;
    if (count > 1) return { status: 400, why: 'more than one Host header', reason: 'bad_host' };
    // RFC 9112 3.2.2: an absolute-form target's authority takes the place of Host.
    const url = req.url ?? '';
    const value = url.startsWith('/') || url === '*' ? req.headers.host : authorityOf(url);
    if (value === undefined) return undefined;
    const host = hostOf(value);
    if (host === undefined)
      return { status: 400, why: 'malformed Host header', reason: 'bad_host' };
    if (this.allows(host)) return undefined;
    return {
      status: 421,
      why: 'this service does not answer for that host name (see --allowed-hosts)',
      reason: 'host_not_allowed',
    };
  }

  /**
   * A browser's `Origin` on a WebSocket upgrade passes when it is the very host:port the client
   * asked for (the page came from here), or a name on the list (a reverse proxy that rewrites
   * Host). Another IP address, or a name not listed, is another site. No `Origin`: not a browser.
   */
  originAllowed(req: IncomingMessage): boolean {
    const origin = req.headers.origin;
    if (origin === undefined) return true;
    try {
      const from = new URL(origin);
      if (from.protocol !== 'http:' && from.protocol !== 'https:') return false;
      // Through URL on both sides: `example.com:80` and `http://example.com` are the same host.
      if (new URL(`${from.protocol}//${req.headers.host}`).host === from.host) return true;
      const name = from.hostname.replace(/^\[|\]$/g, '');
      return isIP(name) === 0 && this.allows(name.replace(/\.$/, ''));
    } catch {
      return false;
    }
  }
}

/** The default list: the bound address when it is a name, and the loopback names. */
export function defaultAllowedHosts(bound: string): string[] {
  const names = ['localhost', '127.0.0.1', '::1'];
  const host = bound.toLowerCase();
  if (!names.includes(host) && isIP(host) === 0) names.unshift(host);
  return names;
}
