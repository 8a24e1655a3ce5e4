import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stopAtExit } from './leftovers.ts';

export interface Daemon {
  /** `http://127.0.0.1:port`. */
  readonly url: string;
  /** Its own temporary directory (config, data), removed by `stop()`. */
  readonly dir: string;
  log(): string;
  /** SIGTERM, wait for the exit, remove the directory; safe to call twice. */
  stop(): Promise<void>;
}

/**
 * Starts `command` (a Prometheus-style server) and waits until `url/-/ready` answers. `args` gets
 * the directory to keep its files in. A server that exits or never gets ready is killed, its
 * directory removed, and the error carries its log: nothing is left behind.
 */
export async function startDaemon(
  name: string,
  command: string,
  port: number,
  args: (dir: string) => string[],
  prefix: string,
): Promise<Daemon> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  let log = '';
  const child: ChildProcess = spawn(command, args(dir), { stdio: ['ignore', 'pipe', 'pipe'] });
  const append = (c: Buffer) => {
    log += c.toString();
  };
  child.stdout?.on('data', append);
  child.stderr?.on('data', append);
  const forget = stopAtExit(() => child.kill('SIGKILL'));
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      forget();
      resolve();
    }),
  );
  const running = () => child.exitCode === null && child.signalCode === null;
  const stop = async () => {
    if (running()) {
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(`${url}/-/ready`)).ok) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline || !running()) {
      await stop();
      throw new Error(`${name} did not start:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return { url, dir, log: () => log, stop };
}
