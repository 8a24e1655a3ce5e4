import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { startDaemon } from './daemon.ts';

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

export interface ScrapeJob {
  readonly name: string;
  /** `host:port`. */
  readonly target: string;
}

/** A real Prometheus on loopback: 1 s scrapes of `target`, exemplar storage, the given rule files. */
export function startPrometheus(
  target: string,
  ruleFiles: readonly string[],
  options: PrometheusOptions = {},
): Promise<RunningPrometheus> {
  return startPrometheusOn([{ name: 'conversation-orchestrator', target }], ruleFiles, {
    ...options,
    exemplars: true,
    dirPrefix: 'orchestrator-prometheus-',
  });
}

/**
 * A real Prometheus on loopback scraping `jobs` (one target each) every second, evaluating the
 * given rule files; `exemplars` turns on exemplar storage, `dirPrefix` names its directory.
 */
export async function startPrometheusOn(
  jobs: readonly ScrapeJob[],
  ruleFiles: readonly string[],
  options: PrometheusOptions & { readonly exemplars?: boolean; readonly dirPrefix: string },
): Promise<RunningPrometheus> {
  const port = await freePort();
  const config = [
    'global:',
    '  scrape_interval: 1s',
    '  evaluation_interval: 1s',
    'rule_files:',
    ...ruleFiles.map((f) => `  - ${JSON.stringify(resolve(f))}`),
    'scrape_configs:',
    ...jobs.flatMap((job) => [
      `  - job_name: ${JSON.stringify(job.name)}`,
      '    static_configs:',
      `      - targets: [${JSON.stringify(job.target)}]`,
    ]),
    ...(options.alertmanagers
      ? [
          'alerting:',
          '  alertmanagers:',
          '    - static_configs:',
          `        - targets: ${JSON.stringify(options.alertmanagers)}`,
        ]
      : []),
  ].join('\n');
  const daemon = await startDaemon(
    'Prometheus',
    'prometheus',
    port,
    (dir) => {
      writeFileSync(join(dir, 'prometheus.yml'), config);
      return [
        `--config.file=${join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        ...(options.exemplars === true ? ['--enable-feature=exemplar-storage'] : []),
      ];
    },
    options.dirPrefix,
  );
  const { url } = daemon;
  return {
    url,
    log: daemon.log,
    async query(path, params = {}) {
      const res = await fetch(`${url}${path}?${new URLSearchParams(params)}`);
      return (await res.json()) as { status: string; data: never; error?: string };
    },
    stop: daemon.stop,
  };
}
