import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';

export interface RunningService {
  readonly child: ChildProcessWithoutNullStreams;
  readonly url: string;
  readonly port: number;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code once the process exits. */
  readonly exited: Promise<number | null>;
}

/** Starts the demo service as a user would (`npm start` runs this same command), on a free port. */
export async function startService(
  args: string[] = [],
  env: NodeJS.ProcessEnv = {},
): Promise<RunningService> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'service/main.ts', '--port', '0', ...args],
    {
      env: { ...process.env, ...env },
      stdio: 'pipe',
    },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr.on('data', (c: Buffer) => {
    err += c.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`service did not start: ${out} ${err}`)),
      30_000,
    );
    const check = () => {
      const m = /listening on http:\/\/[\d.]+:(\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    child.stdout.on('data', check);
    child.on('exit', () => reject(new Error(`service exited: ${out} ${err}`)));
  });
  return {
    child,
    port,
    url: `http://127.0.0.1:${port}`,
    stdout: () => out,
    stderr: () => err,
    exited,
  };
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
    const rest = line
      .slice(line.indexOf('}') + 1)
      .trim()
      .split(' ')[0];
    sum += Number(rest);
  }
  return sum;
}
