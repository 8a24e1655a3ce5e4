// The bench's WebSocket clients (bench/fanout.ts), in a process of their own as real viewers
// would be: `node bench/fanout-clients.mjs PORT N` connects N clients to /ws, 100 at a time,
// prints `ready N` once all are open, counts what they get (without parsing it) and prints
// `frames F bytes B closed C cpu SECONDS` on SIGTERM before exiting (since the last SIGUSR2).
import { WebSocket } from 'ws';

const [port, count] = process.argv.slice(2).map(Number);
let frames = 0;
let bytes = 0;
let closed = 0;
const clients = [];
for (let i = 0; i < count; i += 100) {
  const batch = Array.from({ length: Math.min(100, count - i) }, () => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`);
    ws.on('message', (data) => {
      frames++;
      bytes += data.length;
    });
    ws.on('close', () => closed++);
    ws.on('error', () => {});
    clients.push(ws);
    return new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('unexpected-response', (_req, res) =>
        reject(new Error(`refused: ${res.statusCode}`)),
      );
    });
  });
  await Promise.all(batch);
}
process.stdout.write(`ready ${clients.length}\n`);
// The window starts: count from zero.
let cpuAt = process.cpuUsage();
process.on('SIGUSR2', () => {
  frames = 0;
  bytes = 0;
  cpuAt = process.cpuUsage();
});
process.on('SIGTERM', () => {
  const cpu = process.cpuUsage(cpuAt);
  process.stdout.write(
    `frames ${frames} bytes ${bytes} closed ${closed} cpu ${(cpu.user + cpu.system) / 1e6}\n`,
  );
  for (const ws of clients) ws.terminate();
  process.exit(0);
});
