/**
 * A real Prometheus on loopback scraping several jobs (one target each) every second, with the
 * given rule files: both metric paths of one process side by side, each under its own `job`.
 */
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { startDaemon } from './daemon.ts';
import { freePort, type RunningPrometheus } from './prometheus.ts';

export interface ScrapeJob {
  readonly name: string;
  /** `host:port`. */
  readonly target: string;
}

export async function startPrometheusJobs(
  jobs: readonly ScrapeJob[],
  ruleFiles: readonly string[],
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
      ];
    },
    'orchestrator-prometheus-jobs-',
  );
  return {
    url: daemon.url,
    log: daemon.log,
    async query(path, params = {}) {
      const res = await fetch(`${daemon.url}${path}?${new URLSearchParams(params)}`);
      return (await res.json()) as { status: string; data: never; error?: string };
    },
    stop: daemon.stop,
  };
}
