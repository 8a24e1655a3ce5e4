/**
 * A TCP server on a loopback port that accepts connections and never says a word: what a store
 * meets when its server hangs. Call it inside a `describe`: it starts before the block's tests
 * and closes after them (its connections destroyed).
 */
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll } from 'vitest';

export function silentServer(): { readonly port: number } {
  let server: Server;
  let port = 0;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    server = createServer((socket) => sockets.push(socket));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as { port: number }).port;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return {
    get port() {
      return port;
    },
  };
}
