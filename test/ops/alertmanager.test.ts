import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parse } from 'yaml';
import {
  type RunningAlertmanager,
  startAlertmanager,
  startWebhookReceiver,
  type WebhookReceiver,
} from '../helpers/alertmanager.ts';
import { rules } from '../helpers/ops.ts';

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
    expect(r.stdout).toContain(' - 2 inhibit rules');
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

  it("groups by alertname and orchestrator, inhibits from OrchestratorJobDown within its job, and an SLO's ticket by its page", () => {
    const config = parse(readFileSync(FILE, 'utf8')) as {
      route: { group_by: string[] };
      inhibit_rules: { source_matchers: string[]; target_matchers: string[]; equal: string[] }[];
    };
    expect(config.route.group_by).toEqual(['alertname', 'orchestrator']);
    expect(config.inhibit_rules).toEqual([
      {
        source_matchers: ['alertname="OrchestratorJobDown"'],
        target_matchers: ['alertname=~"Orchestrator.+"', 'alertname!="OrchestratorJobDown"'],
        equal: ['job'],
      },
      {
        source_matchers: ['alertname=~"Orchestrator.+SLOBurn"', 'severity="critical"'],
        target_matchers: ['alertname=~"Orchestrator.+SLOBurn"', 'severity="warning"'],
        equal: ['alertname', 'slo', 'job', 'orchestrator'],
      },
    ]);
    // The SLO inhibition compares `slo` and `orchestrator`: every SLO alert carries both.
    for (const alert of rules().filter((r) => r.alert?.endsWith('SLOBurn'))) {
      expect(alert.labels?.slo, alert.alert).toMatch(/^convergence(_latency)?$/);
      expect(alert.expr, alert.alert).toMatch(/^job_orchestrator:/);
    }
    // The inhibition compares `job`: every alert must carry it, so each aggregates by labels
    // that keep it (recorded `job_orchestrator:...` series, `sum`/`max by (job, ...)`) or selects `up`.
    for (const alert of rules().filter((r) => r.alert)) {
      expect(alert.expr, alert.alert).toMatch(/^(job_[a-z_]*:|up\{|(sum|max) by \(job[,)])/);
    }
  });
});

describe('the inhibition, in a real Alertmanager', () => {
  let receiver: WebhookReceiver;
  let alertmanager: RunningAlertmanager;

  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    const committed = parse(readFileSync(FILE, 'utf8')) as { receivers: { name: string }[] };
    alertmanager = await startAlertmanager({
      ...committed,
      receivers: committed.receivers.map((r) => ({
        name: r.name,
        webhook_configs: [{ url: `${receiver.url}/${r.name}` }],
      })),
    });
  }, 30_000);

  afterAll(async () => {
    await alertmanager?.stop().catch(() => {});
    await receiver?.close().catch(() => {});
  });

  async function post(alerts: Record<string, string>[]): Promise<void> {
    const response = await fetch(`http://${alertmanager.address}/api/v2/alerts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(alerts.map((labels) => ({ labels }))),
    });
    expect(response.status).toBe(200);
  }

  async function states(): Promise<Record<string, string>> {
    const alerts = await alertmanager.alerts();
    return Object.fromEntries(
      alerts.map((a) => [
        `${a.labels.alertname} ${a.labels.job} ${a.labels.instance ?? a.labels.orchestrator ?? ''}`,
        a.status.state,
      ]),
    );
  }

  /** Waits (10 s at most) for `check` to pass: Alertmanager applies what it is posted in its own time. */
  const eventually = (check: () => Promise<void>) =>
    vi.waitFor(check, { timeout: 10_000, interval: 100 });

  /** Waits until the alerts' states, by `states()`'s keys, are `expected`. */
  const statesBecome = (expected: Record<string, string>) =>
    eventually(async () => expect(await states()).toEqual(expected));

  const burn = (
    job: string,
    severity: 'critical' | 'warning',
    alertname = 'OrchestratorConvergenceSLOBurn',
    orchestrator = 'fx_desks',
  ) => ({
    alertname,
    severity,
    slo: alertname === 'OrchestratorConvergenceSLOBurn' ? 'convergence' : 'convergence_latency',
    long_window: severity === 'critical' ? '1h' : '1d',
    short_window: severity === 'critical' ? '5m' : '2h',
    job,
    orchestrator,
  });
  const errors = (job: string) => burn(job, 'critical');

  it('lets one crash-looping replica of several hide nothing, and a job down silence its own job only', async () => {
    // One replica of `agents` is down; the others still serve and fail conversations.
    await post([
      {
        alertname: 'OrchestratorTargetDown',
        severity: 'warning',
        job: 'agents',
        instance: 'agents-1:9464',
      },
      errors('agents'),
      errors('batch'),
    ]);
    await statesBecome({
      'OrchestratorTargetDown agents agents-1:9464': 'active',
      'OrchestratorConvergenceSLOBurn agents fx_desks': 'active',
      'OrchestratorConvergenceSLOBurn batch fx_desks': 'active',
    });

    // Now every replica of `agents` is gone: its alerts are echoes, `batch` still pages.
    await post([{ alertname: 'OrchestratorJobDown', severity: 'critical', job: 'agents' }]);
    await statesBecome({
      'OrchestratorJobDown agents ': 'active',
      'OrchestratorTargetDown agents agents-1:9464': 'suppressed',
      'OrchestratorConvergenceSLOBurn agents fx_desks': 'suppressed',
      'OrchestratorConvergenceSLOBurn batch fx_desks': 'active',
    });
  });
  it("holds back an SLO's ticket while its page fires, for that SLO and orchestrator only", async () => {
    const key = (a: Record<string, string>) =>
      `${a.alertname} ${a.severity} ${a.job} ${a.orchestrator}`;
    const tickets = [
      burn('slo', 'warning'),
      burn('slo', 'warning', 'OrchestratorConvergenceLatencySLOBurn'),
      burn('slo', 'warning', 'OrchestratorConvergenceSLOBurn', 'rates_desks'),
    ];
    await post(tickets);
    const stateOf = async () =>
      Object.fromEntries(
        (await alertmanager.alerts())
          .filter((a) => a.labels.job === 'slo')
          .map((a) => [
            key(a.labels),
            { state: a.status.state, inhibitedBy: a.status.inhibitedBy },
          ]),
      );
    await eventually(async () =>
      expect(Object.values(await stateOf()).map((s) => s.state)).toEqual([
        'active',
        'active',
        'active',
      ]),
    );
    // fx_desks' convergence pages: its convergence ticket is an echo, the latency ticket and
    // rates_desks' ticket are not.
    await post([burn('slo', 'critical')]);
    await eventually(async () => {
      const states = await stateOf();
      const page = (await alertmanager.alerts()).find(
        (a) => a.labels.job === 'slo' && a.labels.severity === 'critical',
      );
      expect(states).toEqual({
        'OrchestratorConvergenceSLOBurn critical slo fx_desks': {
          state: 'active',
          inhibitedBy: [],
        },
        'OrchestratorConvergenceSLOBurn warning slo fx_desks': {
          state: 'suppressed',
          inhibitedBy: [page?.fingerprint],
        },
        'OrchestratorConvergenceLatencySLOBurn warning slo fx_desks': {
          state: 'active',
          inhibitedBy: [],
        },
        'OrchestratorConvergenceSLOBurn warning slo rates_desks': {
          state: 'active',
          inhibitedBy: [],
        },
      });
    });
  });
});
