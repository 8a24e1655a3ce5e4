/**
 * The service's HTTP server, as it must be when it listens on `0.0.0.0`: explicit timeouts that
 * are checked often, request targets parsed in one place (a bad one is a 400, never a throw), and
 * a throwing route answered with a 500 instead of ending the process.
 */
import { createServer, type IncomingMessage, type Server, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { ServiceConfig } from '../config.ts';
import type { HttpRefusalReason } from './health-metrics.ts';
import type { HostAllowlist } from './hosts.ts';
import { type RequestTarget, requestTarget } from './target.ts';

export type Route = (target: RequestTarget, req: IncomingMessage, res: ServerResponse) => void;

export type HttpTimeouts = Pick<
  ServiceConfig,
  'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs'
>;

/**
 * Most requests one connection may have waiting for their answers. Node parses every request in
 * what it has read at once, so a client pipelining 20,000 requests without reading gets 20,000
 * responses queued; past this many the connection is cut instead. A browser or a scraper waits
 * for each answer (at most a handful in flight).
 */
const MAX_PIPELINED = 64;
/** Then the connection is closed after its answer (Connection: close) and the client reconnects. */
const MAX_REQUESTS_PER_SOCKET = 1000;

export interface HttpServerOptions extends HttpTimeouts {
  /** Requests whose Host is not on it get 421 (400 for a malformed or repeated Host). */
  readonly hosts: HostAllowlist;
  /** Called for each request refused for its Host. */
  readonly onRefused?: (reason: HttpRefusalReason) => void;
}

export function createHttpServer(options: HttpServerOptions, route: Route): Server {
  const waiting = new WeakMap<Socket, number>();
  const server = createServer(
    {
      headersTimeout: options.headersTimeoutMs,
      requestTimeout: options.requestTimeoutMs,
      keepAliveTimeout: options.keepAliveTimeoutMs,
      // Node checks the two timeouts above on this interval (30 s by default, which let a silent
      // connection live 90 s): check often enough to cut it close to its timeout.
      connectionsCheckingInterval: Math.min(1000, Math.ceil(options.headersTimeoutMs / 4)),
    },
    (req, res) => {
      const socket = req.socket;
      // Requests read with one that went over the limit below: the connection is already cut.
      if (socket.destroyed) return;
      const pending = (waiting.get(socket) ?? 0) + 1;
      if (pending > MAX_PIPELINED) {
        socket.destroy();
        return;
      }
      waiting.set(socket, pending);
      res.once('close', () => waiting.set(socket, (waiting.get(socket) ?? 1) - 1));
      // Every answer is what its content-type says, page or not.
      res.setHeader('x-content-type-options', 'nosniff');
      const target = requestTarget(req);
      if (target === undefined) {
        res
          .writeHead(400, { 'content-type': 'text/plain', connection: 'close' })
          .end('bad request target\n');
        return;
      }
      const refusal = options.hosts.refusal(req);
      if (refusal !== undefined) {
        options.onRefused?.(refusal.reason);
        res
          .writeHead(refusal.status, { 'content-type': 'text/plain', connection: 'close' })
          .end(`${refusal.why}\n`);
        return;
      }
      try {
        route(target, req, res);
      } catch (error) {
        process.stderr.write(`request ${req.method} ${target.pathname} failed: ${String(error)}\n`);
        if (res.headersSent) res.destroy();
        else res.writeHead(500, { 'content-type': 'text/plain' }).end('internal error\n');
      }
    },
  );
  // A client that stops reading a response is cut after this long without progress.
  server.setTimeout(options.requestTimeoutMs);
  server.maxRequestsPerSocket = MAX_REQUESTS_PER_SOCKET;
  return server;
}

/**
 * Node hands every request with an `Upgrade` header to the 'upgrade' listeners once there is one,
 * so an `Upgrade: h2c` (`curl --http2`) or any other protocol would never reach the routes. Such a
 * request is answered as if the header were absent (RFC 9110 lets a server ignore an upgrade),
 * then the connection closes: Node's parser has let go of the socket.
 */
export function serveIgnoringUpgrade(server: Server, req: IncomingMessage, duplex: Duplex): void {
  // An upgrade's socket is always the connection's net.Socket, handed over without listeners.
  const socket = duplex as Socket;
  socket.on('error', () => socket.destroy());
  const res = new ServerResponse(req);
  res.shouldKeepAlive = false;
  res.assignSocket(socket);
  // The server's timeouts no longer watch this socket: a client that never reads is cut here.
  socket.setTimeout(server.timeout, () => socket.destroy());
  res.once('finish', () => socket.end(() => socket.destroy()));
  res.once('close', () => socket.destroy());
  server.emit('request', req, res);
}

/** Thrown by `listen` with a message for the operator (the service exits 2 with it). */
export class ListenError extends Error {
  override name = 'ListenError';
}

const LISTEN_ERRORS: Record<string, string> = {
  EADDRINUSE: 'the port is in use (EADDRINUSE)',
  EADDRNOTAVAIL: "the address is not one of this machine's (EADDRNOTAVAIL)",
  EACCES: 'not allowed (EACCES; ports below 1024 need privileges)',
  ENOTFOUND: 'the host name does not resolve (ENOTFOUND)',
  EAI_AGAIN: 'the host name does not resolve (EAI_AGAIN)',
};

/** Listens and resolves with the port; a failure to listen is a `ListenError` that says why. */
export async function listen(server: Server, host: string, port: number): Promise<number> {
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, resolve);
    });
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    throw new ListenError(
      `Cannot listen on --host ${host} --port ${port}: ${LISTEN_ERRORS[code ?? ''] ?? message}`,
    );
  }
  // Past listening, an error (EMFILE on accept, say) is reported, not fatal.
  server.on('error', (error) => process.stderr.write(`server error: ${String(error)}\n`));
  return (server.address() as AddressInfo).port;
}

/**
 * `listen` for the entry points: the port, or undefined once a failure to listen has been said on
 * stderr (the service then exits 2). Any other error is thrown.
 */
export async function listenOrReport(
  server: Server,
  host: string,
  port: number,
): Promise<number | undefined> {
  try {
    return await listen(server, host, port);
  } catch (error) {
    if (!(error instanceof ListenError)) throw error;
    process.stderr.write(`${error.message}\n`);
    return undefined;
  }
}
