/**
 * A real `redis-server` for tests: on a free loopback port, its data in a temporary directory,
 * started by the test and stopped by it. `kill('SIGKILL')` then `restart()` is a crash of the
 * server: the restarted one loads the same directory (its AOF, when `aof` is on) on the same port.
 *
 * ```ts
 * const redis = await startRedis({ aof: true });
 * const client = new Redis(redis.url);
 * await redis.kill('SIGKILL');
 * await redis.restart();
 * await redis.stop();
 * ```
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stopAtExit } from './leftovers.ts';
import { freePort } from './prometheus.ts';

export const REDIS_SERVER = '/usr/bin/redis-server';

export interface RedisOptions {
  /** Append-only file on (`appendonly yes`); off means no persistence at all (no RDB either). */
  readonly aof?: boolean;
  /** `appendfsync` when `aof` is on. Default `always`: every acknowledged write is on disk. */
  readonly appendfsync?: 'always' | 'everysec' | 'no';
  /** More `--name value` pairs for redis-server. */
  readonly args?: readonly string[];
}

export interface RunningRedis {
  /** `redis://127.0.0.1:port`. */
  readonly url: string;
  readonly port: number;
  /** Its own temporary directory (AOF, logs), removed by `stop()`. */
  readonly dir: string;
  /** What the current server process wrote to stdout and stderr. */
  log(): string;
  /** Sends `signal` (a crash: `SIGKILL`) and waits until the process has exited. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /**
   * Freezes the server (`SIGSTOP`): its connections stay open and nothing answers (a hung host),
   * until `resume()`. `kill()`, `restart()` and `stop()` resume it first.
   */
  pause(): void;
  /** Lets a paused server run again (`SIGCONT`): it answers what it was sent meanwhile. */
  resume(): void;
  /** Starts the server again on the same port and directory; waits until it answers PING. */
  restart(): Promise<void>;
  /** Stops the server (SIGTERM) and removes its directory; safe to call twice. */
  stop(): Promise<void>;
}

/** Whether this machine has redis-server (tests and bench rows skip without it). */
export function hasRedisServer(): boolean {
  return existsSync(REDIS_SERVER);
}

/**
 * Answers true once the server replies to a PING with `+PONG` (or `-NOAUTH`, when it has a
 * password): not while it is still loading its AOF (`-LOADING`).
 */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    let reply = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      if (reply.includes('\r\n')) done(/^(\+PONG|-NOAUTH)/.test(reply));
    });
  });
}

export async function startRedis(options: RedisOptions = {}): Promise<RunningRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'co-redis-'));
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    options.aof === true ? 'yes' : 'no',
    '--appendfsync',
    options.appendfsync ?? 'always',
    '--daemonize',
    'no',
    '--protected-mode',
    'no',
    ...(options.args ?? []),
  ];
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let log = '';
  const running = () => child !== undefined && child.exitCode === null && child.signalCode === null;

  const start = async () => {
    log = '';
    const proc = spawn(REDIS_SERVER, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    const forget = stopAtExit(() => proc.kill('SIGKILL'));
    exited = new Promise((resolve) =>
      proc.once('exit', () => {
        forget();
        resolve();
      }),
    );
    const append = (c: Buffer) => {
      log += c.toString();
    };
    proc.stdout?.on('data', append);
    proc.stderr?.on('data', append);
    const deadline = Date.now() + 30_000;
    while (!(await ping(port))) {
      if (!running() || Date.now() > deadline) {
        if (running()) proc.kill('SIGKILL');
        await exited;
        throw new Error(`redis-server on port ${port} did not start:\n${log}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const kill = async (signal: NodeJS.Signals = 'SIGKILL') => {
    if (running()) {
      child?.kill(signal);
      // A stopped process acts on a signal other than SIGKILL only once continued.
      child?.kill('SIGCONT');
      await exited;
    }
  };
  try {
    await start();
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    log: () => log,
    kill,
    pause: () => {
      if (running()) child?.kill('SIGSTOP');
    },
    resume: () => {
      if (running()) child?.kill('SIGCONT');
    },
    restart: async () => {
      await kill('SIGKILL');
      await start();
    },
    stop: async () => {
      await kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
