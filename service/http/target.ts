/**
 * The one place a request target is parsed. `new URL(req.url, base)` throws on targets a client
 * controls (`//[`, `//a:99999`: a protocol-relative URL with a bad host or port), and a throw in
 * an HTTP or upgrade handler ends the process; here a bad target is a value, not an exception.
 */
import type { IncomingMessage } from 'node:http';

/** What a handler needs from a request target: its path and query. */
export interface RequestTarget {
  readonly pathname: string;
  readonly searchParams: URLSearchParams;
}

/**
 * Origin-form as RFC 3986 allows it: `/`, then path and query characters and `%XX` escapes. A
 * target starting with `//` is refused too: URL parsers read it as a host (`//a:99999`), so what
 * it names depends on who parses it.
 */
const ORIGIN_FORM = /^\/(?!\/)(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*$/;

/** Origin-form (`/path?query`) or absolute-form (`http://host/path`) targets; else `undefined`. */
export function requestTarget(req: IncomingMessage): RequestTarget | undefined {
  const raw = req.url ?? '';
  try {
    if (raw.startsWith('/')) {
      // Appended to a fixed origin, a checked target can only be a path and a query.
      return ORIGIN_FORM.test(raw) ? new URL(`http://localhost${raw}`) : undefined;
    }
    const url = new URL(raw);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url : undefined;
  } catch {
    return undefined;
  }
}
