/**
 * The /ws opening handshake, decided before ws sees it: which upgrades are refused and why (each
 * answered in plain HTTP, counted when worth a series), and what a client subscribes to with
 * `?orchestrator=` (a refused value is echoed in the close reason only when it is safe to).
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { addressKey } from '../http/address-key.ts';
import type { RefusalReason } from '../http/health-metrics.ts';
import type { HostAllowlist } from '../http/hosts.ts';
import type { RequestTarget } from '../http/target.ts';

/** A WebSocket close reason is at most 123 bytes. */
const MAX_REASON_BYTES = 123;
/**
 * A refused subscription value is echoed in the close reason only when it looks like this (short,
 * an identifier); any other value is described by its length, never echoed.
 */
const ECHOABLE = /^[a-zA-Z_][a-zA-Z0-9_]{0,63}$/;

export interface Refusal {
  readonly status: number;
  readonly why: string;
  /** Counted on /metrics when set (a wrong path is not worth a series). */
  readonly reason?: RefusalReason;
  /** Header lines to add, each ending in CRLF. */
  readonly headers?: string;
}

/** What the refusals read of the endpoint at the moment of an upgrade. */
export interface Admission {
  /** The host names the service answers for (Host and Origin are checked against it). */
  readonly hosts: HostAllowlist;
  /** The endpoint is shutting down. */
  readonly closing: boolean;
  /** Clients connected now, and the most at once. */
  readonly clients: number;
  readonly maxClients: number;
  /** Clients connected now from one address (an `addressKey`), and the most from one. */
  readonly clientsFrom: (address: string) => number;
  readonly maxClientsPerAddress: number;
}

/** Why this upgrade is refused, the first reason in the order checked; undefined: accepted. */
export function upgradeRefusal(
  target: RequestTarget | undefined,
  req: IncomingMessage,
  admission: Admission,
): Refusal | undefined {
  if (target === undefined) return { status: 400, why: 'bad request target', reason: 'bad_target' };
  const host = admission.hosts.refusal(req);
  if (host !== undefined) return host;
  if (target.pathname !== '/ws') return { status: 404, why: 'WebSocket only at /ws' };
  // RFC 6455 4.1: the opening handshake is an HTTP/1.1 (or later) GET.
  if (req.httpVersion === '1.0' || req.httpVersion === '0.9')
    return { status: 400, why: 'a WebSocket upgrade needs HTTP/1.1', reason: 'bad_handshake' };
  const version = req.headers['sec-websocket-version'];
  if (version === undefined)
    return { status: 400, why: 'no Sec-WebSocket-Version header', reason: 'bad_handshake' };
  // RFC 6455 4.4: another version is answered 426 with the versions this server speaks.
  if (version.trim() !== '13') {
    return {
      status: 426,
      why: 'only WebSocket version 13 is supported',
      reason: 'bad_handshake',
      headers: 'Sec-WebSocket-Version: 13\r\n',
    };
  }
  if (!admission.hosts.originAllowed(req))
    return { status: 403, why: 'cross-site WebSocket upgrade', reason: 'cross_origin' };
  if (admission.closing) return { status: 503, why: 'shutting down' };
  const max = admission.maxClients;
  if (admission.clients >= max) {
    return { status: 503, why: `at most ${max} WebSocket clients`, reason: 'over_capacity' };
  }
  const perAddress = admission.maxClientsPerAddress;
  if (admission.clientsFrom(addressKey(req.socket.remoteAddress)) >= perAddress) {
    return {
      status: 503,
      why: `at most ${perAddress} WebSocket clients from one address (an IPv6 client: one /64)`,
      reason: 'address_over_capacity',
    };
  }
  return undefined;
}

/** Answers in HTTP and closes: the upgrade never happened. */
export function writeRefusal(socket: Duplex, { status, why, headers = '' }: Refusal): void {
  const text = STATUS_TEXT[status] ?? 'Error';
  // Written, then destroyed: a client that never reads or closes must not hold the socket.
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\nConnection: close\r\n${headers}Content-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(why) + 1}\r\n\r\n${why}\n`,
    () => socket.destroy(),
  );
}

/**
 * The subscription the `orchestrator` query values ask for: none is everything, one known name
 * that orchestrator; anything else is refused with a close reason (at most 123 bytes) saying why.
 */
export function subscription(
  values: readonly string[],
  known: readonly string[],
): { readonly filter: string | undefined } | { readonly refused: string } {
  if (values.length === 0) return { filter: undefined };
  const value = values[0] as string;
  if (values.length === 1 && known.includes(value)) return { filter: value };
  const got =
    values.length > 1
      ? `${values.length} values`
      : value === '' || ECHOABLE.test(value)
        ? `\`${value}\``
        : // Characters as a person counts them (code points), not UTF-16 units.
          `a value of ${[...value].length} characters`;
  return { refused: clip(`Expected orchestrator to be one of ${known.join(', ')}, got ${got}`) };
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  403: 'Forbidden',
  404: 'Not Found',
  421: 'Misdirected Request',
  426: 'Upgrade Required',
  503: 'Service Unavailable',
};

function clip(reason: string): string {
  if (Buffer.byteLength(reason) <= MAX_REASON_BYTES) return reason;
  return `${Buffer.from(reason)
    .subarray(0, MAX_REASON_BYTES - 3)
    .toString()
    .replace(/\uFFFD$/, '')}...`;
}
