/**
 * A real Prometheus on loopback scraping several jobs (one target each) every second, with the
 * given rule files: both metric paths of one process side by side, each under its own `job`.
 */
import { type RunningPrometheus, type ScrapeJob, startPrometheusOn } from './prometheus.ts';

export type { ScrapeJob };

export function startPrometheusJobs(
  jobs: readonly ScrapeJob[],
  ruleFiles: readonly string[],
): Promise<RunningPrometheus> {
  return startPrometheusOn(jobs, ruleFiles, { dirPrefix: 'orchestrator-prometheus-jobs-' });
}
