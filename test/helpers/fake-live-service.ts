/**
 * A stand-in for the demo service that serves the real live page (service/live/page.ts) and says
 * on its `/ws` whatever a test makes it say: how the page reads what no honest service would send.
 */
import { createServer, type Server } from 'node:http';
import { WebSocketServer } from 'ws';
import { Page as LivePage } from '../../service/live/page.ts';

export interface FakeLiveService {
  /** The page's address, `http://127.0.0.1:<port>/`. */
  readonly url: string;
  /** Terminates its clients and stops listening. */
  close(): Promise<void>;
}

/**
 * Listens on a free loopback port; each client that connects to `/ws` is greeted by `greet`, with
 * a `send` that writes a message to that client as JSON.
 */
export async function startFakeLiveService(
  greet: (send: (m: object) => void) => void,
): Promise<FakeLiveService> {
  const files = new LivePage();
  const server: Server = createServer((req, res) => {
    if (!files.serve(new URL(req.url ?? '/', 'http://x').pathname, req, res))
      res.writeHead(404).end();
  });
  const wss = new WebSocketServer({ server, path: '/ws' });
  wss.on('connection', (ws) => greet((m) => ws.send(JSON.stringify(m))));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const ws of wss.clients) ws.terminate();
        wss.close();
        server.close(() => resolve());
      }),
  };
}
