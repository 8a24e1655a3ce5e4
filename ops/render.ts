/**
 * Everything the ops bundle generates from one config, as file path (relative to the output
 * directory) → content. `npm run ops` writes it; the staleness test compares it with the
 * committed files.
 */
import type { OpsConfig } from './config.ts';
import { overviewDashboard } from './dashboards/overview.ts';
import { respondersDashboard } from './dashboards/responders.ts';

export function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

export function renderOps(config: OpsConfig): Map<string, string> {
  return new Map([
    ['grafana/dashboards/overview.json', json(overviewDashboard(config))],
    ['grafana/dashboards/responders.json', json(respondersDashboard(config))],
  ]);
}
