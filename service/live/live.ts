/**
 * The seed's consumer case: a WebSocket endpoint pushing per-dispatch convergence updates to
 * subscribed clients. `/ws` subscribes to everything; `/ws?orchestrator=fx_desks` to one
 * orchestrator. A slow client is skipped (its updates dropped and counted), never waited for.
 *
 * Updates leave the dispatch path: `publish` (the orchestrators' listener) only records what
 * changed, per conversation, in O(1) and for no client in particular. A timer then builds ONE
 * serialized `updates` frame of what changed in the interval (one per subscription, at most one
 * per orchestrator plus one for all) and hands it to every client, a bounded batch of clients
 * per turn of the event loop so that /healthz and the conversations keep their turns with 2,000
 * clients watching (and with more than 800 clients, frames come less often: MAX_SENDS_PER_SECOND).
 * A client whose socket holds more than MAX_BUFFERED unsent bytes is skipped
 * for the frame (its updates counted as dropped, said on stderr at most every 10 s) and, once it
 * has been that slow for SLOW_CLIENT_CUTOFF_MS, disconnected (`slow_reader`).
 *
 * The endpoint faces the network, so nothing a client does may end the process or grow its
 * memory: frames are capped at a few bytes (the endpoint only sends), a client that sends data
 * is closed, clients are capped, silent clients are dropped by ping, and shutdown gives clients
 * a short grace before cutting them off.
 *
 * Beside it: the handshake's refusals and subscriptions (handshake.ts), the frames of an interval
 * (frames.ts) and what a client may send (inbound.ts).
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import { MAX_DISPATCHES } from '../desks/desk-policies.ts';
import { addressKey } from '../http/address-key.ts';
import type { RefusalReason, ServiceMetrics } from '../http/health-metrics.ts';
import type { HostAllowlist } from '../http/hosts.ts';
import { RateLimitedReport } from '../http/rate-limited-report.ts';
import { serveIgnoringUpgrade } from '../http/server.ts';
import { requestTarget } from '../http/target.ts';
import { Frames, type PendingDispatches } from './frames.ts';
import { type Refusal, subscription, upgradeRefusal, writeRefusal } from './handshake.ts';
import { InboundBudget, MAX_PAYLOAD } from './inbound.ts';
import type { EndUpdate, LiveMessage } from './updates.ts';

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
  /**
   * Messages sent after the hello (the history), for a client subscribed to `filter`: at the
   * first frame after the client connected, so that the frames that follow continue them exactly.
   * Computed once per subscription per frame, however many clients connected meanwhile.
   */
  readonly greeting?: (filter: string | undefined) => readonly object[];
  /**
   * Between two `updates` frames, in ms: a client gets at most one frame per interval, whatever
   * the number of dispatches.
   * @default FRAME_INTERVAL_MS (100)
   */
  readonly frameIntervalMs?: number;
  /**
   * Where the rate-limited line about dropped updates and slow clients goes.
   * @default a line on stderr
   */
  readonly report?: (line: string) => void;
  /**
   * How long a client gets to answer the close handshake at shutdown before it is cut off.
   * @default 1000
   */
  readonly closeGraceMs?: number;
}

/** Past this many buffered bytes a client is too slow: its updates are dropped. */
export const MAX_BUFFERED = 256 * 1024;
/** Between two `updates` frames by default, in ms. */
export const FRAME_INTERVAL_MS = 100;
/** A client skipped for being too slow, and still too slow this long after, is disconnected. */
export const SLOW_CLIENT_CUTOFF_MS = 5_000;
/**
 * Clients a frame is handed to per turn of the event loop: each send is a few microseconds, so a
 * turn stays well under a millisecond and HTTP requests and dispatches get theirs in between.
 */
const CLIENTS_PER_TURN = 100;
/**
 * Most frames handed out per second, all clients together: past FRAME_INTERVAL_MS × this many
 * clients (800 by default), frames come less often (2,000 clients: one every 250 ms), each
 * carrying more. A send is a system call; their total is what watching costs the desks.
 */
export const MAX_SENDS_PER_SECOND = 8_000;
/** At most one line about dropped updates per this many ms (with the counts since the last). */
const DROP_REPORT_MS = 10_000;
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
  readonly #frameTimer: NodeJS.Timeout;
  #closing = false;
  /** What changed since the last frame: each conversation's dispatches, then the endings. */
  #dispatches = new Map<string, PendingDispatches>();
  #ends: Omit<EndUpdate, 'type'>[] = [];
  /** Clients accepted since the last frame: they get the greeting with the next one. */
  #joining = new Set<WebSocket>();
  /** The frame being handed out, a batch of clients per turn; the next waits for it. */
  #out: Outgoing | undefined;
  /** When the last frame started going out. */
  #lastFrameAt = Number.NEGATIVE_INFINITY;
  /** When each client now being skipped was first skipped in a row. */
  readonly #slowSince = new Map<WebSocket, number>();
  readonly #drops: RateLimitedReport;
  #slowCutSinceReport = 0;

  constructor(options: LiveUpdatesOptions) {
    this.#options = options;
    // Pings are answered here (autoPong off), so a client that floods pings without reading the
    // pongs is cut off and counted; ws would terminate it silently.
    this.#wss = new WebSocketServer({ noServer: true, maxPayload: MAX_PAYLOAD, autoPong: false });
    this.#heartbeat = setInterval(() => this.#ping(), options.pingIntervalMs);
    this.#heartbeat.unref();
    this.#frameTimer = setInterval(
      () => this.#frame(),
      options.frameIntervalMs ?? FRAME_INTERVAL_MS,
    );
    this.#frameTimer.unref();
    const report = options.report ?? ((line: string) => process.stderr.write(`${line}\n`));
    this.#drops = new RateLimitedReport(DROP_REPORT_MS, (updates, frames) => {
      const cut = this.#slowCutSinceReport;
      this.#slowCutSinceReport = 0;
      report(
        `live updates dropped: ${updates} updates in ${frames} frames not sent to clients too slow to read them since the last report${cut > 0 ? `; ${cut} disconnected, slow for ${SLOW_CLIENT_CUTOFF_MS / 1000} s` : ''}`,
      );
    });
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

  /**
   * Records an update for the next frame: O(1), whatever the number of clients (it runs on the
   * dispatch path, in the orchestrators' listener). Nothing is serialized or sent here.
   */
  publish(update: LiveMessage): void {
    if (this.#subscribers.size === 0) return;
    if (update.type === 'approval' || update.type === 'decided') {
      this.#notice(update);
      return;
    }
    if (update.type === 'end') {
      const { type: _, ...end } = update;
      this.#ends.push(end);
      return;
    }
    const pending = this.#dispatches.get(update.conversationId);
    if (pending === undefined) {
      this.#dispatches.set(update.conversationId, {
        orchestrator: update.orchestrator,
        conversationId: update.conversationId,
        fromDispatch: update.dispatchCount,
        spreads: [update.spread],
        decision: update.decision,
        elapsedMs: update.elapsedMs,
        worker: update.worker,
        resumed: update.resumed === true,
      });
      return;
    }
    pending.spreads.push(update.spread);
    pending.decision = update.decision;
    pending.elapsedMs = update.elapsedMs;
    pending.worker = update.worker;
    if (update.resumed === true) pending.resumed = true;
  }

  /**
   * A person-in-the-loop notice (a conversation waits for approval, or was decided): rare, so
   * sent at once, serialized once, to each client that follows its orchestrator and keeps up.
   */
  #notice(update: LiveMessage): void {
    let payload: string | undefined;
    for (const [ws, filter] of this.#subscribers) {
      if (filter !== undefined && filter !== update.orchestrator) continue;
      if (ws.readyState !== WebSocket.OPEN || ws.bufferedAmount > MAX_BUFFERED) continue;
      payload ??= JSON.stringify(update);
      ws.send(payload);
    }
  }

  /**
   * Hands out what is still unsent (the frame going out and the updates since), says goodbye
   * to every client, waits at most the grace, then cuts off the rest.
   */
  close(): Promise<void> {
    this.#closing = true;
    clearInterval(this.#heartbeat);
    clearInterval(this.#frameTimer);
    this.#handOut(Number.POSITIVE_INFINITY);
    this.#frame();
    this.#handOut(Number.POSITIVE_INFINITY);
    this.#drops.flush();
    for (const ws of this.#wss.clients) this.#goodbye(ws, 1001, 'service shutting down');
    return new Promise((resolve) => this.#wss.close(() => resolve()));
  }

  /**
   * Once per interval: the greeting for the clients that joined, then one frame of what changed
   * for everyone else. While the previous frame is still going out, the updates wait (and are
   * coalesced into the next).
   */
  #frame(): void {
    if (this.#out !== undefined) return;
    const now = performance.now();
    // Many clients: frames further apart (close() sends the last one whatever the time).
    if (
      !this.#closing &&
      now - this.#lastFrameAt < (this.#subscribers.size * 1000) / MAX_SENDS_PER_SECOND
    )
      return;
    const dispatches = this.#dispatches;
    const ends = this.#ends;
    const joining = this.#joining;
    if (dispatches.size === 0 && ends.length === 0 && joining.size === 0) return;
    this.#dispatches = new Map();
    this.#ends = [];
    this.#joining = new Set();
    // The greeting is taken now, with the updates so far in it: the frames that follow it
    // continue it exactly.
    const greetings = new Map<string | undefined, string[]>();
    for (const ws of joining) {
      if (ws.readyState !== WebSocket.OPEN || !this.#subscribers.has(ws)) continue;
      const filter = this.#subscribers.get(ws);
      let messages = greetings.get(filter);
      if (messages === undefined) {
        messages = (this.#options.greeting?.(filter) ?? []).map((m) => JSON.stringify(m));
        greetings.set(filter, messages);
      }
      for (const message of messages) ws.send(message);
    }
    if (dispatches.size === 0 && ends.length === 0) return;
    this.#lastFrameAt = now;
    const targets: WebSocket[] = [];
    for (const ws of this.#subscribers.keys()) if (!joining.has(ws)) targets.push(ws);
    this.#out = { targets, next: 0, frames: new Frames(dispatches.values(), ends) };
    this.#handOut(CLIENTS_PER_TURN);
  }

  /** Hands the frame going out to at most `clients` more clients; the rest on the next turn. */
  #handOut(clients: number): void {
    const out = this.#out;
    if (out === undefined) return;
    const end = Math.min(out.targets.length, out.next + clients);
    const now = performance.now();
    for (; out.next < end; out.next++)
      this.#send(out.targets[out.next] as WebSocket, out.frames, now);
    if (out.next < out.targets.length) setImmediate(() => this.#handOut(CLIENTS_PER_TURN));
    else this.#out = undefined;
  }

  #send(ws: WebSocket, frames: Frames, now: number): void {
    if (ws.readyState !== WebSocket.OPEN || !this.#subscribers.has(ws)) return;
    const frame = frames.for(this.#subscribers.get(ws));
    if (frame === undefined) return;
    if (ws.bufferedAmount > MAX_BUFFERED) {
      this.#options.metrics.dropped.inc(frame.updates);
      this.#drops.record(frame.updates, '');
      const since = this.#slowSince.get(ws);
      if (since === undefined) this.#slowSince.set(ws, now);
      else if (now - since >= SLOW_CLIENT_CUTOFF_MS) {
        this.#slowCutSinceReport++;
        this.#cutOff(ws, 'slow_reader');
      }
      return;
    }
    this.#slowSince.delete(ws);
    ws.send(frame.data, { binary: false });
  }

  #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    // Node hands over the raw socket without an error listener: a reset here must not be an
    // unhandled 'error' event.
    socket.on('error', () => socket.destroy());
    const target = requestTarget(req);
    const refusal = upgradeRefusal(target, req, {
      hosts: this.#options.hosts,
      closing: this.#closing,
      clients: this.#subscribers.size,
      maxClients: this.#options.maxClients,
      clientsFrom: (address) => this.#perAddress.get(address) ?? 0,
      maxClientsPerAddress: this.#options.maxClientsPerAddress,
    });
    if (refusal !== undefined || target === undefined) {
      this.#refuse(socket, refusal ?? { status: 400, why: 'bad request target' });
      return;
    }
    const subscribed = subscription(
      target.searchParams.getAll('orchestrator'),
      this.#options.orchestrators,
    );
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
      if ('refused' in subscribed) {
        this.#options.metrics.refused.inc({ reason: 'bad_subscription' });
        this.#goodbye(ws, 1008, subscribed.refused);
        return;
      }
      this.#accept(ws, subscribed.filter, addressKey(req.socket.remoteAddress));
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
      this.#joining.delete(ws);
      this.#slowSince.delete(ws);
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
    this.#joining.add(ws);
  }

  /** Pings every client, a batch per turn of the event loop like the frames. */
  #ping(): void {
    const clients = [...this.#subscribers.keys()];
    let next = 0;
    const turn = () => {
      const end = Math.min(clients.length, next + CLIENTS_PER_TURN);
      for (; next < end; next++) {
        const ws = clients[next] as WebSocket;
        if (!this.#subscribers.has(ws) || ws.readyState !== WebSocket.OPEN) continue;
        if (this.#unanswered.has(ws)) {
          this.#cutOff(ws, 'no_pong');
          continue;
        }
        const payload = randomBytes(8);
        this.#unanswered.set(ws, payload);
        ws.ping(payload);
      }
      if (next < clients.length && !this.#closing) setImmediate(turn);
    };
    turn();
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

  /** Counts the refusal when it is worth a series, and answers it. */
  #refuse(socket: Duplex, refusal: Refusal): void {
    if (refusal.reason !== undefined) this.#options.metrics.refused.inc({ reason: refusal.reason });
    writeRefusal(socket, refusal);
  }

  #cutOff(ws: WebSocket, reason: RefusalReason): void {
    if (this.#cut.has(ws) || ws.readyState === WebSocket.CLOSED) return;
    this.#cut.add(ws);
    this.#subscribers.delete(ws);
    this.#options.metrics.refused.inc({ reason });
    ws.terminate();
  }
}

/** A frame on its way out: the clients it goes to, how far it got, what it says. */
interface Outgoing {
  readonly targets: readonly WebSocket[];
  next: number;
  readonly frames: Frames;
}

// The live updates as the service's flags set them up, in either mode (single process or fleet):
// the client bounds, the ping interval and the hello the page draws from (the orchestrators to
// filter by, the tolerance band, the dispatch cap), with what the mode adds to the hello.

/** The service's flags the live updates read (a `ServiceConfig` has them). */
export interface LiveFlags {
  readonly maxClients: number;
  readonly maxClientsPerAddress: number;
  readonly wsPingSeconds: number;
  readonly tolerance: number;
}

/** What the mode chooses of its live updates. */
export interface ServiceLiveOptions {
  readonly hosts: HostAllowlist;
  readonly orchestrators: readonly string[];
  readonly metrics: ServiceMetrics;
  /** The hello's entries after the orchestrators, the tolerance and `maxDispatches`. */
  readonly hello: Readonly<Record<string, unknown>>;
  readonly greeting: NonNullable<LiveUpdatesOptions['greeting']>;
}

/** The live updates of a service started with `cfg`, for the mode's `options`. */
export function createServiceLive(cfg: LiveFlags, options: ServiceLiveOptions): LiveUpdates {
  return new LiveUpdates({
    hosts: options.hosts,
    orchestrators: options.orchestrators,
    maxClients: cfg.maxClients,
    maxClientsPerAddress: cfg.maxClientsPerAddress,
    pingIntervalMs: cfg.wsPingSeconds * 1000,
    metrics: options.metrics,
    hello: {
      orchestrators: options.orchestrators,
      tolerance: cfg.tolerance,
      maxDispatches: MAX_DISPATCHES,
      ...options.hello,
    },
    greeting: options.greeting,
  });
}
