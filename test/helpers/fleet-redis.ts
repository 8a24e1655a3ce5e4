/**
 * A real redis-server for the fleet tests, until branch netstores' test/helpers/redis.ts is merged:
 * a free loopback port, its own temporary directory, AOF with `appendfsync always` (every write
 * on disk before the reply), SIGKILL and restart on the same port and data.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

export interface FleetRedis {
  readonly url: string;
  readonly port: number;
  /** SIGKILL: no shutdown save, only what the AOF holds survives. */
  kill(): Promise<void>;
  /** Starts it again on the same port and directory. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

export async function startFleetRedis(): Promise<FleetRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'co-fleet-redis-'));
  const port = await freePort();
  let child: ChildProcess | undefined;
  let log = '';
  const launch = async () => {
    child = spawn(
      '/usr/bin/redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        dir,
        '--appendonly',
        'yes',
        '--appendfsync',
        'always',
        '--save',
        '',
        '--daemonize',
        'no',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child.stdout?.on('data', (c: Buffer) => {
      log += c.toString();
    });
    const deadline = Date.now() + 20_000;
    for (;;) {
      const probe = new Redis({
        port,
        host: '127.0.0.1',
        lazyConnect: true,
        maxRetriesPerRequest: 0,
      });
      try {
        await probe.connect();
        if ((await probe.ping()) === 'PONG') {
          // Loading the AOF answers LOADING: wait for a real answer.
          await probe.dbsize();
          probe.disconnect();
          return;
        }
      } catch {
        // not up yet
      }
      probe.disconnect();
      if (Date.now() > deadline) throw new Error(`redis-server did not start:\n${log}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const kill = async () => {
    const c = child;
    if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await exited;
  };
  await launch();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    kill,
    restart: launch,
    async stop() {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
