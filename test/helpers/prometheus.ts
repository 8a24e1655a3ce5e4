import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => res(port));
    });
  });
}

export interface RunningPrometheus {
  readonly url: string;
  query<T = unknown>(
    path: string,
    params?: Record<string, string>,
  ): Promise<{ status: string; data: T; error?: string }>;
  stop(): Promise<void>;
  log(): string;
}

export interface PrometheusOptions {
  /** `host:port` of Alertmanagers to send alerts to. */
  readonly alertmanagers?: readonly string[];
}

/** A real Prometheus on loopback: 1 s scrapes of `target`, exemplar storage, the given rule files. */
export async function startPrometheus(
  target: string,
  ruleFiles: readonly string[],
  options: PrometheusOptions = {},
): Promise<RunningPrometheus> {
  const dir = mkdtempSync(join(tmpdir(), 'orchestrator-prometheus-'));
  const port = await freePort();
  const config = [
    'global:',
    '  scrape_interval: 1s',
    '  evaluation_interval: 1s',
    'rule_files:',
    ...ruleFiles.map((f) => `  - ${JSON.stringify(resolve(f))}`),
    'scrape_configs:',
    '  - job_name: conversation-orchestrator',
    '    static_configs:',
    `      - targets: [${JSON.stringify(target)}]`,
    ...(options.alertmanagers
      ? [
          'alerting:',
          '  alertmanagers:',
          '    - static_configs:',
          `        - targets: ${JSON.stringify(options.alertmanagers)}`,
        ]
      : []),
  ].join('\n');
  writeFileSync(join(dir, 'prometheus.yml'), config);
  let log = '';
  const child: ChildProcess = spawn(
    'prometheus',
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--enable-feature=exemplar-storage',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  child.stdout?.on('data', (c: Buffer) => {
    log += c.toString();
  });
  child.stderr?.on('data', (c: Buffer) => {
    log += c.toString();
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(`${url}/-/ready`)).ok) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline || child.exitCode !== null) {
      // Never leave a half-started Prometheus behind.
      if (child.exitCode === null) child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`Prometheus did not start:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    url,
    log: () => log,
    async query(path, params = {}) {
      const res = await fetch(`${url}${path}?${new URLSearchParams(params)}`);
      return (await res.json()) as { status: string; data: never; error?: string };
    },
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
