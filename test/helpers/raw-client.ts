import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';

/** A TCP connection that records what the server sent and when it closed. */
export interface RawConnection {
  readonly socket: Socket;
  /** Everything the server sent, as latin1 text. */
  received(): string;
  /** Milliseconds from connecting to the server closing the connection; undefined while open. */
  closedAfterMs(): number | undefined;
  readonly closed: Promise<void>;
}

/** Opens a plain TCP connection (for bytes no HTTP client would send), from `localAddress`. */
export async function rawConnect(port: number, localAddress?: string): Promise<RawConnection> {
  const socket = connect({ port, host: '127.0.0.1', ...(localAddress ? { localAddress } : {}) });
  const started = performance.now();
  let text = '';
  let closedAfter: number | undefined;
  socket.on('data', (chunk: Buffer) => {
    text += chunk.toString('latin1');
  });
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) =>
    socket.once('close', () => {
      closedAfter = performance.now() - started;
      resolve();
    }),
  );
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return { socket, received: () => text, closedAfterMs: () => closedAfter, closed };
}

/** Sends `request` as is and returns the status line of the answer (or '' if closed without one). */
export async function rawStatusLine(port: number, request: string): Promise<string> {
  const c = await rawConnect(port);
  c.socket.write(request, 'latin1');
  await c.closed;
  return c.received().split('\r\n')[0] ?? '';
}

/** A WebSocket handshake by hand; resolves with the socket once the server answered 101. */
export async function rawWebSocket(
  port: number,
  path: string,
  localAddress?: string,
): Promise<RawConnection> {
  const c = await rawConnect(port, localAddress);
  c.socket.write(
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
      `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\n\r\n`,
  );
  const deadline = performance.now() + 10_000;
  while (!c.received().includes('\r\n\r\n')) {
    if (c.closedAfterMs() !== undefined || performance.now() > deadline)
      throw new Error(`no handshake answer: ${c.received()}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  if (!c.received().startsWith('HTTP/1.1 101')) throw new Error(`refused: ${c.received()}`);
  return c;
}

/** The header of a masked client binary frame announcing `length` payload bytes. */
export function frameHeader(length: number): Buffer {
  const header = Buffer.alloc(14);
  header[0] = 0x82; // FIN, binary
  header[1] = 0x80 | 127; // masked, 64-bit length
  header.writeBigUInt64BE(BigInt(length), 2);
  randomBytes(4).copy(header, 10);
  return header;
}

/** A masked client frame: `opcode` (0x9 ping, 0xA pong, 0x1 text, 0x0 continuation) and FIN. */
export function clientFrame(opcode: number, payload: Buffer, fin = true): Buffer {
  if (payload.length > 125) throw new Error('only short frames here');
  // A zero mask: the payload goes as is.
  return Buffer.concat([
    Buffer.from([(fin ? 0x80 : 0) | opcode, 0x80 | payload.length, 0, 0, 0, 0]),
    payload,
  ]);
}

/** Writes `bytes` again and again, as fast as the socket takes them, until it closes. */
export async function flood(c: RawConnection, bytes: Buffer): Promise<void> {
  const chunk = Buffer.concat(
    Array.from({ length: Math.ceil(16_384 / bytes.length) }, () => bytes),
  );
  while (c.closedAfterMs() === undefined && !c.socket.destroyed) {
    if (!c.socket.write(chunk)) {
      await Promise.race([new Promise((r) => c.socket.once('drain', r)), c.closed]);
    }
  }
}
