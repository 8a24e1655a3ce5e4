/**
 * The seed's consumer case: a WebSocket endpoint pushing per-dispatch convergence updates to
 * subscribed clients. `/ws` subscribes to everything; `/ws?orchestrator=fx_desks` to one
 * orchestrator. A slow client is skipped (its updates dropped and counted), never waited for.
 *
 * The endpoint faces the network, so nothing a client does may end the process or grow its
 * memory: frames are capped at a few bytes (the endpoint only sends), a client that sends data
 * is closed, clients are capped, silent clients are dropped by ping, and shutdown gives clients
 * a short grace before cutting them off.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import { addressKey } from './address-key.ts';
import type { RefusalReason, ServiceMetrics } from './health-metrics.ts';
import type { HostAllowlist } from './hosts.ts';
import { serveIgnoringUpgrade } from './http.ts';
import { type RequestTarget, requestTarget } from './target.ts';
import type { LiveMessage } from './updates.ts';

export interface LiveUpdatesOptions {
  /** The orchestrators a client may subscribe to with `?orchestrator=`. */
  readonly orchestrators: readonly string[];
  /** Most clients at once; past it an upgrade is refused with 503. */
  readonly maxClients: number;
  /** Most clients from one remote address; past it an upgrade is refused with 503. */
  readonly maxClientsPerAddress: number;
  /** Between pings; a client that has not answered the previous ping is dropped. */
  readonly pingIntervalMs: number;
  /** The host names the service answers for (Host and Origin are checked against it). */
  readonly hosts: HostAllowlist;
  /** Where refusals and dropped updates are counted. */
  readonly metrics: ServiceMetrics;
  /** What the hello message tells a client besides its subscription (the page's settings). */
  readonly hello: Readonly<Record<string, unknown>>;
  /** Messages sent right after the hello (the history), for a client subscribed to `filter`. */
  readonly greeting?: (filter: string | undefined) => readonly object[];
  /**
   * How long a client gets to answer the close handshake at shutdown before it is cut off.
   * @default 1000
   */
  readonly closeGraceMs?: number;
}

/** Past this many buffered bytes a client is too slow: its updates are dropped. */
const MAX_BUFFERED = 256 * 1024;
/**
 * The largest message ws reads from a client, in bytes (a control frame is at most 125 anyway).
 * A frame announcing more is refused from its header with 1009, before its payload is read; a
 * smaller data message is read whole, and its sender is then closed with 1008.
 */
const MAX_PAYLOAD = 1024;
/**
 * What a client may send, whatever the frame kind (pings, pongs, fragments, close): a budget
 * refilled over time, and a client past it is cut off (`frame_flood`). The page sends one
 * 14-byte pong per ping and a close frame; a script's keep-alive pings fit many times over. A
 * flood of 125-byte pongs or empty frames spends the burst in well under a second.
 */
export const INBOUND_LIMITS = {
  /** Bytes a client may send at once, and per second after that. */
  burstBytes: 8 * 1024,
  bytesPerSecond: 1024,
  /** Control frames (pings and unsolicited pongs) a client may send at once, and per second. */
  burstFrames: 32,
  framesPerSecond: 2,
} as const;
/** A WebSocket close reason is at most 123 bytes. */
const MAX_REASON_BYTES = 123;
/**
 * A refused subscription value is echoed in the close reason only when it looks like this (short,
 * an identifier); any other value is described by its length, never echoed.
 */
const ECHOABLE = /^[a-zA-Z_][a-zA-Z0-9_]{0,63}$/;

export class LiveUpdates {
  readonly #options: LiveUpdatesOptions;
  readonly #wss: WebSocketServer;
  readonly #subscribers = new Map<WebSocket, string | undefined>();
  /**
   * The payload of the ping each client has not answered yet. Only a pong with that payload
   * answers it: ws keeps a client alive on any pong, and a client that sends unsolicited pongs
   * without reading would otherwise hold its slot forever.
   */
  readonly #unanswered = new Map<WebSocket, Buffer>();
  readonly #perAddress = new Map<string, number>();
  /** Clients already cut off (each is counted once). */
  readonly #cut = new WeakSet<WebSocket>();
  readonly #heartbeat: NodeJS.Timeout;
  #closing = false;

  constructor(options: LiveUpdatesOptions) {
    this.#options = options;
    // Pings are answered here (autoPong off), so a client that floods pings without reading the
    // pongs is cut off and counted; ws would terminate it silently.
    this.#wss = new WebSocketServer({ noServer: true, maxPayload: MAX_PAYLOAD, autoPong: false });
    this.#heartbeat = setInterval(() => this.#ping(), options.pingIntervalMs);
    this.#heartbeat.unref();
  }

  attach(server: Server): void {
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      // Only WebSocket upgrades are ours; `Upgrade: h2c` and the like are plain requests.
      if (req.headers.upgrade?.trim().toLowerCase() === 'websocket')
        this.#upgrade(req, socket, head);
      else serveIgnoringUpgrade(server, req, socket);
    });
  }

  get subscribers(): number {
    return this.#subscribers.size;
  }

  publish(update: LiveMessage): void {
    if (this.#subscribers.size === 0) return;
    let payload: string | undefined;
    for (const [ws, filter] of this.#subscribers) {
      if (filter !== undefined && filter !== update.orchestrator) continue;
      if (ws.readyState !== WebSocket.OPEN) continue;
      if (ws.bufferedAmount > MAX_BUFFERED) {
        this.#options.metrics.dropped.inc();
        continue;
      }
      payload ??= JSON.stringify(update);
      ws.send(payload);
    }
  }

  /** Says goodbye to every client, waits at most the grace, then cuts off the rest. */
  close(): Promise<void> {
    this.#closing = true;
    clearInterval(this.#heartbeat);
    for (const ws of this.#wss.clients) this.#goodbye(ws, 1001, 'service shutting down');
    return new Promise((resolve) => this.#wss.close(() => resolve()));
  }

  #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    // Node hands over the raw socket without an error listener: a reset here must not be an
    // unhandled 'error' event.
    socket.on('error', () => socket.destroy());
    const target = requestTarget(req);
    const refusal = this.#refusal(target, req);
    if (refusal !== undefined || target === undefined) {
      this.#refuse(socket, refusal ?? { status: 400, why: 'bad request target' });
      return;
    }
    const subscription = this.#subscription(target.searchParams.getAll('orchestrator'));
    // Without verifyClient, ws completes the handshake synchronously: the cap above holds.
    this.#wss.handleUpgrade(req, socket, head, (ws) => {
      const budget = new InboundBudget();
      // Past the budget the client is cut once ws has dealt with what it read: ws reports a
      // frame too big a tick later, and cutting at once would lose the close frame (1009) the
      // client is owed. A client being closed is cut by its goodbye's grace instead.
      let cutting = false;
      const spend = (bytes: number, frames: number) => {
        if (budget.take(bytes, frames) || cutting) return;
        cutting = true;
        setImmediate(() => {
          if (ws.readyState === WebSocket.OPEN) this.#cutOff(ws, 'frame_flood');
        });
      };
      // Every byte the client sends, after ws has read it: whatever frames they make.
      if (head.length > 0) spend(head.length, 0);
      socket.on('data', (chunk: Buffer) => spend(chunk.length, 0));
      ws.on('ping', () => spend(0, 1));
      // An answer to the service's own ping is not the client's doing; any other pong is.
      ws.on('pong', (data) => {
        if (this.#unanswered.get(ws)?.equals(data) !== true) spend(0, 1);
      });
      if ('refused' in subscription) {
        this.#options.metrics.refused.inc({ reason: 'bad_subscription' });
        this.#goodbye(ws, 1008, subscription.refused);
        return;
      }
      this.#accept(ws, subscription.filter, addressKey(req.socket.remoteAddress));
    });
  }

  #accept(ws: WebSocket, filter: string | undefined, from: string): void {
    this.#subscribers.set(ws, filter);
    this.#perAddress.set(from, (this.#perAddress.get(from) ?? 0) + 1);
    ws.on('ping', (data) => {
      if (this.#cut.has(ws)) return;
      if (ws.bufferedAmount > MAX_BUFFERED) this.#cutOff(ws, 'ping_flood');
      else ws.pong(data);
    });
    ws.on('pong', (data) => {
      if (this.#unanswered.get(ws)?.equals(data)) this.#unanswered.delete(ws);
    });
    ws.on('close', () => {
      this.#subscribers.delete(ws);
      this.#unanswered.delete(ws);
      const left = (this.#perAddress.get(from) ?? 1) - 1;
      if (left > 0) this.#perAddress.set(from, left);
      else this.#perAddress.delete(from);
    });
    // Oversized frames (over maxPayload) and protocol errors: ws has already sent the close
    // code (1009, 1002) and stopped reading; the client gets the grace to see it, then goes.
    ws.on('error', () => {
      this.#options.metrics.refused.inc({ reason: 'client_sent_data' });
      this.#goodbye(ws, 1008, '');
    });
    ws.once('message', () => {
      this.#options.metrics.refused.inc({ reason: 'client_sent_data' });
      this.#goodbye(ws, 1008, 'this endpoint only sends; it reads nothing');
    });
    ws.send(JSON.stringify({ type: 'hello', subscribed: filter ?? '*', ...this.#options.hello }));
    for (const message of this.#options.greeting?.(filter) ?? []) ws.send(JSON.stringify(message));
  }

  #subscription(
    values: readonly string[],
  ): { readonly filter: string | undefined } | { readonly refused: string } {
    if (values.length === 0) return { filter: undefined };
    const known = this.#options.orchestrators;
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

  #ping(): void {
    for (const ws of this.#subscribers.keys()) {
      if (this.#unanswered.has(ws)) {
        this.#cutOff(ws, 'no_pong');
        continue;
      }
      const payload = randomBytes(8);
      this.#unanswered.set(ws, payload);
      ws.ping(payload);
    }
  }

  /**
   * A close handshake waits for the client's answer (30 s by default in ws); a client that
   * never reads never answers, so it gets the grace and is then cut off.
   */
  #goodbye(ws: WebSocket, code: number, reason: string): void {
    ws.close(code, reason);
    const cut = setTimeout(() => ws.terminate(), this.#options.closeGraceMs ?? 1000);
    cut.unref();
    ws.once('close', () => clearTimeout(cut));
  }

  #cutOff(ws: WebSocket, reason: RefusalReason): void {
    if (this.#cut.has(ws) || ws.readyState === WebSocket.CLOSED) return;
    this.#cut.add(ws);
    this.#subscribers.delete(ws);
    this.#options.metrics.refused.inc({ reason });
    ws.terminate();
  }

  #refusal(target: RequestTarget | undefined, req: IncomingMessage): Refusal | undefined {
    if (target === undefined)
      return { status: 400, why: 'bad request target', reason: 'bad_target' };
    const host = this.#options.hosts.refusal(req);
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
    if (!this.#options.hosts.originAllowed(req))
      return { status: 403, why: 'cross-site WebSocket upgrade', reason: 'cross_origin' };
    if (this.#closing) return { status: 503, why: 'shutting down' };
    const max = this.#options.maxClients;
    if (this.#subscribers.size >= max) {
      return { status: 503, why: `at most ${max} WebSocket clients`, reason: 'over_capacity' };
    }
    const perAddress = this.#options.maxClientsPerAddress;
    if ((this.#perAddress.get(addressKey(req.socket.remoteAddress)) ?? 0) >= perAddress) {
      return {
        status: 503,
        why: `at most ${perAddress} WebSocket clients from one address (an IPv6 client: one /64)`,
        reason: 'address_over_capacity',
      };
    }
    return undefined;
  }

  /** Answers in HTTP and closes: the upgrade never happened. */
  #refuse(socket: Duplex, { status, why, reason, headers = '' }: Refusal): void {
    if (reason !== undefined) this.#options.metrics.refused.inc({ reason });
    const text = STATUS_TEXT[status] ?? 'Error';
    // Written, then destroyed: a client that never reads or closes must not hold the socket.
    socket.end(
      `HTTP/1.1 ${status} ${text}\r\nConnection: close\r\n${headers}Content-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(why) + 1}\r\n\r\n${why}\n`,
      () => socket.destroy(),
    );
  }
}

interface Refusal {
  readonly status: number;
  readonly why: string;
  /** Counted on /metrics when set (a wrong path is not worth a series). */
  readonly reason?: RefusalReason;
  /** Header lines to add, each ending in CRLF. */
  readonly headers?: string;
}

/** A token bucket over bytes and control frames, refilled on use. */
class InboundBudget {
  #bytes: number = INBOUND_LIMITS.burstBytes;
  #frames: number = INBOUND_LIMITS.burstFrames;
  #at = performance.now();

  /** Spends what came; false once the client is past its budget. */
  take(bytes: number, frames: number): boolean {
    const now = performance.now();
    const seconds = (now - this.#at) / 1000;
    this.#at = now;
    this.#bytes = Math.min(
      INBOUND_LIMITS.burstBytes,
      this.#bytes + seconds * INBOUND_LIMITS.bytesPerSecond,
    );
    this.#frames = Math.min(
      INBOUND_LIMITS.burstFrames,
      this.#frames + seconds * INBOUND_LIMITS.framesPerSecond,
    );
    this.#bytes -= bytes;
    this.#frames -= frames;
    return this.#bytes >= 0 && this.#frames >= 0;
  }
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
