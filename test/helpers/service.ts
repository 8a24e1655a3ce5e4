import { type ChildProcessWithoutNullStreams, execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { outputOf } from './child-output.ts';

export interface RunningService {
  readonly child: ChildProcessWithoutNullStreams;
  readonly url: string;
  readonly port: number;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code once the process exits. */
  readonly exited: Promise<number | null>;
}

/** A service process and what it printed so far. */
export interface SpawnedService {
  readonly child: ChildProcessWithoutNullStreams;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code once the process exits. */
  readonly exited: Promise<number | null>;
}

/**
 * A fresh data directory per service unless the test names one (`--data`, `--store`): services
 * of tests running at once must not recover each other's conversations from one `.data/`.
 */
export function withDataDir(args: readonly string[]): string[] {
  if (args.includes('--data') || args.includes('--store') || args.includes('--help')) {
    return [...args];
  }
  return [...args, '--data', mkdtempSync(join(tmpdir(), 'demo-data-'))];
}

/**
 * Spawns the demo service as `npm start` does, on a free port unless `args` names one (the
 * service refuses a repeated flag), without waiting for it to listen. `preload` modules are
 * imported before the service (test fixtures that hold it back).
 */
export function spawnService(
  args: string[] = [],
  env: NodeJS.ProcessEnv = {},
  preload: readonly string[] = [],
): SpawnedService {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      ...preload.flatMap((module) => ['--import', module]),
      'service/main.ts',
      ...(args.includes('--port') ? [] : ['--port', '0']),
      ...withDataDir(args),
    ],
    { env: { ...process.env, ...env }, stdio: 'pipe' },
  );
  const output = outputOf(child);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, stdout: () => output.out, stderr: () => output.err, exited };
}

/** Starts the demo service as a user would (`npm start` runs this same command), on a free port. */
export async function startService(
  args: string[] = [],
  env: NodeJS.ProcessEnv = {},
  preload: readonly string[] = [],
): Promise<RunningService> {
  const spawned = spawnService(args, env, preload);
  const { child } = spawned;
  const out = spawned.stdout;
  const err = spawned.stderr;
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`service did not start: ${out()} ${err()}`)),
      30_000,
    );
    const check = () => {
      const m = /listening on http:\/\/([\d.]+|\[[\da-f:]+\]):(\d+)/.exec(out());
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[2]));
      }
    };
    child.stdout.on('data', check);
    child.on('exit', () => reject(new Error(`service exited: ${out()} ${err()}`)));
  });
  return { ...spawned, port, url: `http://127.0.0.1:${port}` };
}

export function sampleValue(text: string, series: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1).split(' ')[0]);
  }
  return undefined;
}

/** Sum of every sample of a family whose labels include all `labels`. */
export function sumSamples(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    // An unlabelled sample has no `}`: its value follows the name.
    const rest = line
      .slice(line.startsWith(`${name} `) ? name.length : line.indexOf('}') + 1)
      .trim()
      .split(' ')[0];
    sum += Number(rest);
  }
  return sum;
}

/** Runs the service's command line to its end (for bad configuration: it must exit at once). */
export function runServiceCommand(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'service/main.ts', ...withDataDir(args)],
      { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 30_000 },
      (error, stdout, stderr) => {
        if (error !== null && typeof error.code !== 'number') reject(error);
        else resolve({ status: error === null ? 0 : (error.code as number), stdout, stderr });
      },
    );
  });
}

/** Stops a service started by `startService`, whatever state it is in (for `finally`). */
export async function stopService(service: RunningService | undefined): Promise<void> {
  if (service === undefined || service.child.exitCode !== null) return;
  service.child.kill('SIGKILL');
  await service.exited;
}

/** The resident set size of a process, from /proc (Linux), in bytes. */
export function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
  if (kb === undefined) throw new Error(`no VmRSS for process ${pid}`);
  return Number(kb) * 1024;
}

/** The service's /metrics as Prometheus text. */
export async function scrape(service: RunningService): Promise<string> {
  return (await fetch(`${service.url}/metrics`)).text();
}

export interface LiveClientOptions {
  readonly autoPong?: boolean;
  readonly origin?: string;
  readonly localAddress?: string;
  readonly headers?: Record<string, string>;
}

/** A WebSocket client that records what it got and how it was closed (or refused). */
export function liveClient(url: string, options: LiveClientOptions = {}) {
  const ws = new WebSocket(url, options);
  const messages: { type: string; [key: string]: unknown }[] = [];
  const state: { code?: number; reason?: string; status?: number | undefined } = {};
  ws.on('message', (data) => {
    const message = JSON.parse(String(data)) as { type: string; [key: string]: unknown };
    if (message.type !== 'updates') {
      messages.push(message);
      return;
    }
    // An `updates` frame (docs/service.md), unfolded: one `dispatch` per dispatch, then one `end`
    // per ending, as the service published them.
    const frame = message as unknown as {
      dispatches?: { fromDispatch: number; spreads: number[]; [key: string]: unknown }[];
      ends?: Record<string, unknown>[];
    };
    for (const { fromDispatch, spreads, ...d } of frame.dispatches ?? []) {
      spreads.forEach((spread, i) => {
        messages.push({ ...d, type: 'dispatch', dispatchCount: fromDispatch + i, spread });
      });
    }
    for (const e of frame.ends ?? []) messages.push({ ...e, type: 'end' });
  });
  ws.on('close', (code, reason) => {
    state.code = code;
    state.reason = reason.toString();
  });
  ws.on('unexpected-response', (_req, res) => {
    state.status = res.statusCode;
    ws.terminate();
  });
  ws.on('error', () => {});
  return { ws, messages, state };
}
