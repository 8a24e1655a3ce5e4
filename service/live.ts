/**
 * The seed's consumer case: a WebSocket endpoint pushing per-dispatch convergence updates to
 * subscribed clients. `/ws` subscribes to everything; `/ws?orchestrator=fx_desks` to one
 * orchestrator. A slow client is skipped (its updates dropped and counted), never waited for.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import type { TerminationDecision } from '../src/index.ts';

export interface DispatchUpdate {
  readonly type: 'dispatch';
  readonly orchestrator: string;
  readonly conversationId: string;
  readonly dispatchCount: number;
  readonly spread: number;
  readonly decision: TerminationDecision;
  readonly elapsedMs: number;
}

/** Past this many buffered bytes a client is too slow: its updates are dropped. */
const MAX_BUFFERED = 1 << 20;

export class LiveUpdates {
  readonly #wss = new WebSocketServer({ noServer: true });
  readonly #subscribers = new Map<WebSocket, string | undefined>();
  dropped = 0;

  attach(server: Server): void {
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      if (url.pathname !== '/ws') {
        socket.destroy();
        return;
      }
      this.#wss.handleUpgrade(req, socket, head, (ws) => {
        this.#subscribers.set(ws, url.searchParams.get('orchestrator') ?? undefined);
        ws.on('close', () => this.#subscribers.delete(ws));
        ws.on('error', () => this.#subscribers.delete(ws));
        ws.send(
          JSON.stringify({
            type: 'hello',
            subscribed: url.searchParams.get('orchestrator') ?? '*',
          }),
        );
      });
    });
  }

  get subscribers(): number {
    return this.#subscribers.size;
  }

  publish(update: DispatchUpdate): void {
    if (this.#subscribers.size === 0) return;
    let payload: string | undefined;
    for (const [ws, filter] of this.#subscribers) {
      if (filter !== undefined && filter !== update.orchestrator) continue;
      if (ws.readyState !== WebSocket.OPEN) continue;
      if (ws.bufferedAmount > MAX_BUFFERED) {
        this.dropped++;
        continue;
      }
      payload ??= JSON.stringify(update);
      ws.send(payload);
    }
  }

  close(): Promise<void> {
    for (const ws of this.#subscribers.keys()) ws.close(1001, 'service shutting down');
    return new Promise((resolve) => this.#wss.close(() => resolve()));
  }
}
