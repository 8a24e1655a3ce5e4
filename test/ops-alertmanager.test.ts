import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { rules } from './helpers/ops.ts';

const FILE = 'alertmanager/alertmanager.yml';

function amtool(...args: string[]) {
  return spawnSync('amtool', args, { encoding: 'utf8' });
}

/** The receiver `amtool` routes an alert with these labels to. */
function routeOf(labels: Record<string, string>): string {
  const r = amtool(
    'config',
    'routes',
    'test',
    `--config.file=${FILE}`,
    ...Object.entries(labels).map(([k, v]) => `${k}=${v}`),
  );
  expect(r.status, r.stderr).toBe(0);
  return r.stdout.trim();
}

describe('alertmanager/alertmanager.yml', () => {
  it('passes amtool check-config', () => {
    const r = amtool('check-config', FILE);
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('SUCCESS');
    expect(r.stdout).toContain(' - 1 inhibit rules');
    expect(r.stdout).toContain(' - 2 receivers');
  });

  it('still passes with its commented Slack and PagerDuty examples switched on', () => {
    const text = readFileSync(FILE, 'utf8');
    // Uncomment the example blocks under the receivers, keeping their title lines as comments.
    const uncommented = text.replace(/^( {4})# (?!PagerDuty|Slack)/gm, '$1');
    const config = parse(uncommented) as { receivers: Record<string, unknown>[] };
    expect(config.receivers.map((r) => Object.keys(r).sort())).toEqual([
      ['name', 'pagerduty_configs', 'webhook_configs'],
      ['name', 'slack_configs', 'webhook_configs'],
    ]);
    const dir = mkdtempSync(join(tmpdir(), 'orchestrator-amtool-'));
    try {
      writeFileSync(join(dir, 'alertmanager.yml'), uncommented);
      const r = amtool('check-config', join(dir, 'alertmanager.yml'));
      expect(r.status, r.stdout + r.stderr).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('routes every alert by its severity: critical to critical, warning to warning', () => {
    for (const alert of rules().filter((r) => r.alert)) {
      const severity = alert.labels?.severity as string;
      expect(
        routeOf({ alertname: alert.alert as string, severity, orchestrator: 'fx_desks' }),
        alert.alert,
      ).toBe(severity);
    }
    // An alert nobody labelled still reaches someone.
    expect(routeOf({ alertname: 'Unlabelled' })).toBe('warning');
  });

  it('groups by alertname and orchestrator, and lets a down target of a job silence that job only', () => {
    const config = parse(readFileSync(FILE, 'utf8')) as {
      route: { group_by: string[] };
      inhibit_rules: { source_matchers: string[]; target_matchers: string[]; equal: string[] }[];
    };
    expect(config.route.group_by).toEqual(['alertname', 'orchestrator']);
    expect(config.inhibit_rules).toEqual([
      {
        source_matchers: ['alertname="OrchestratorTargetDown"'],
        target_matchers: ['alertname=~"Orchestrator.+"', 'alertname!="OrchestratorTargetDown"'],
        equal: ['job'],
      },
    ]);
    // The inhibition compares `job`: every alert must carry it, so each selects either series
    // recorded at a level that keeps it (`job_orchestrator:...`) or `up` itself.
    for (const alert of rules().filter((r) => r.alert)) {
      expect(alert.expr, alert.alert).toMatch(/^(job_[a-z_]*:|up\{)/);
    }
  });
});
