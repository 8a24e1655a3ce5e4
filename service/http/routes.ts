/**
 * The service's HTTP routes, defined once for both modes (single process in service/main.ts,
 * fleet mode in service/fleet/fleet-mode.ts): `/metrics`, `/healthz`, the plain-HTTP answer at
 * `/ws` and the 404 for anything else. What differs between the modes is passed in: the handlers
 * answered first (the live page's files, the approvals' resume route) and what `/healthz` says.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIPv6 } from 'node:net';
import type { SharedExposition } from './exposition.ts';
import type { Route } from './server.ts';
import type { RequestTarget } from './target.ts';

/** A handler of some paths, tried before the table: true when it answered the request. */
export type Handler = (target: RequestTarget, req: IncomingMessage, res: ServerResponse) => boolean;

/** What `/healthz` says at one moment: 503 while stopping, 200 otherwise. */
export interface HealthReport {
  readonly stopping: boolean;
  /** Conversations in flight (run by this process, or started and not ended in fleet mode). */
  readonly inFlight: number;
  /** More of the mode's own, each under its key after `status` and `inFlight` (fleet mode: `fleet`). */
  readonly more?: Readonly<Record<string, unknown>>;
}

export interface ServiceRoutesOptions {
  /** Tried in order before the table; the first that answers ends the request. */
  readonly handlers: readonly Handler[];
  /** The exposition `/metrics` serves. */
  readonly metrics: SharedExposition;
  /** Read at each request to `/healthz`. */
  readonly health: () => HealthReport;
}

/** One path of the table: the methods it answers (any other gets 405) and how. */
interface Endpoint {
  /** Undefined: every method (the WebSocket endpoint answers each plain request alike). */
  readonly methods?: readonly string[];
  readonly answer: (req: IncomingMessage, res: ServerResponse) => void;
}

const READ_ONLY = ['GET', 'HEAD'] as const;

/** The paths the service answers, as the 404 names them. */
export const SERVICE_PATHS = ['/', '/metrics', '/healthz', '/ws'] as const;

/** The table of the service's own paths, with the mode's parts filled in. */
function endpoints(options: ServiceRoutesOptions): ReadonlyMap<string, Endpoint> {
  return new Map<string, Endpoint>([
    [
      '/metrics',
      {
        methods: READ_ONLY,
        answer: (req, res) => {
          options.metrics.get(req.headers).then(
            ({ contentType, body }) =>
              res.writeHead(200, { 'content-type': contentType }).end(body),
            (error: unknown) => res.writeHead(500).end(String(error)),
          );
        },
      },
    ],
    [
      '/healthz',
      {
        methods: READ_ONLY,
        answer: (_req, res) => {
          const { stopping, inFlight, more } = options.health();
          res.writeHead(stopping ? 503 : 200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ status: stopping ? 'stopping' : 'ok', inFlight, ...more }));
        },
      },
    ],
    [
      '/ws',
      {
        // A plain request (or an upgrade to something else) at the WebSocket endpoint.
        answer: (_req, res) => {
          res
            .writeHead(426, { upgrade: 'websocket', 'content-type': 'text/plain' })
            .end('/ws speaks WebSocket only (Upgrade: websocket)\n');
        },
      },
    ],
  ]);
}

/** The route both modes give `createHttpServer`: the handlers, then the table, then 404. */
export function serviceRoutes(options: ServiceRoutesOptions): Route {
  const table = endpoints(options);
  const notFound = `not found: try ${SERVICE_PATHS.slice(0, -1).join(', ')} or ${SERVICE_PATHS.at(-1)}\n`;
  return (target, req, res) => {
    for (const handler of options.handlers) if (handler(target, req, res)) return;
    const endpoint = table.get(target.pathname);
    if (endpoint === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end(notFound);
    } else if (endpoint.methods !== undefined && !endpoint.methods.includes(req.method ?? '')) {
      res
        .writeHead(405, { allow: endpoint.methods.join(', '), 'content-type': 'text/plain' })
        .end('read only\n');
    } else {
      endpoint.answer(req, res);
    }
  };
}

/** The first line the service prints once it listens, the same in both modes. */
export function listeningLine(host: string, port: number): string {
  // An IPv6 address is bracketed in a URL: http://[::1]:9464, not http://::1:9464.
  const authority = `${isIPv6(host) ? `[${host}]` : host}:${port}`;
  return `conversation-orchestrator demo listening on http://${authority} (the live page at /, /metrics, /healthz, ws://${authority}/ws)`;
}
