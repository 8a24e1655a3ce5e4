/**
 * Alert delivery, end to end, with real processes: the demo service with a degraded mix (a
 * quarter of its conversations fail, a third of the converged ones converge slowly), a real
 * Prometheus evaluating rules generated from a test config whose SLO periods and burn-rate windows
 * are compressed from days to seconds, a real Alertmanager routing with the committed
 * alertmanager/alertmanager.yml (only its webhook URLs and group timers swapped), and a local
 * webhook receiver standing in for the people paged.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parse } from 'yaml';
import { defineOpsConfig } from '../../ops/config.ts';
import { yaml } from '../../ops/render.ts';
import { rules } from '../../ops/rules.ts';
import {
  type Notification,
  type RunningAlertmanager,
  startAlertmanager,
  startWebhookReceiver,
  type WebhookAlert,
  type WebhookReceiver,
} from '../helpers/alertmanager.ts';
import { type RunningPrometheus, startPrometheus } from '../helpers/prometheus.ts';
import { type RunningService, startService } from '../helpers/service.ts';

/**
 * The default config with the SLOs' days compressed into seconds: a 2-minute period, a page at
 * 14.4x over 30s and 10s, a ticket at 3x over 1m and 20s. The convergence SLO promises 99% (a
 * quarter failing burns it 25x: it pages, and its ticket is held back); the latency one 95%
 * within 0.5s (a third of the converged taking 2s burns it ~6.7x: it only tickets).
 */
const config = defineOpsConfig({
  rateWindow: '20s',
  dispatchWindow: '5s',
  slos: {
    convergence: { objective: 0.99, period: '2m' },
    convergenceLatency: { objective: 0.95, period: '2m', thresholdSeconds: 0.5 },
  },
  burnRateAlerts: [
    { severity: 'critical', burnRate: 14.4, longWindow: '30s', shortWindow: '10s', for: '1s' },
    { severity: 'warning', burnRate: 3, longWindow: '1m', shortWindow: '20s', for: '1s' },
  ],
  targetDown: { for: '1s' },
  jobDown: { for: '1s' },
});

interface AlertmanagerConfig {
  route: { group_wait: string; group_interval: string };
  receivers: { name: string; [key: string]: unknown }[];
}

/** The committed routing, inhibition and receivers, with webhooks into `receiver` and 1 s timers. */
function testAlertmanagerConfig(receiver: WebhookReceiver): AlertmanagerConfig {
  const committed = parse(
    readFileSync('alertmanager/alertmanager.yml', 'utf8'),
  ) as AlertmanagerConfig;
  return {
    ...committed,
    route: { ...committed.route, group_wait: '1s', group_interval: '1s' },
    receivers: committed.receivers.map((r) => ({
      name: r.name,
      webhook_configs: [{ url: `${receiver.url}/${r.name}` }],
    })),
  };
}

let dir: string;
let receiver: WebhookReceiver;
let alertmanager: RunningAlertmanager;
let prometheus: RunningPrometheus;
let service: RunningService;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'orchestrator-alerting-'));
  writeFileSync(join(dir, 'rules.yml'), yaml(rules(config)));
  receiver = await startWebhookReceiver();
  alertmanager = await startAlertmanager(testAlertmanagerConfig(receiver));
  // Calm markets converge at once, slow ones in ~2 s (above the test's 0.5 s), broken feeds fail.
  service = await startService([
    '--mix',
    'converge=2,slow=1,fail=1',
    '--rate',
    '20',
    '--progress-s',
    '60',
  ]);
  prometheus = await startPrometheus(`127.0.0.1:${service.port}`, [join(dir, 'rules.yml')], {
    alertmanagers: [alertmanager.address],
  });
}, 60_000);

afterAll(async () => {
  // Every process stops, whatever happened; each step on its own so one failure stops nothing else.
  if (service && service.child.exitCode === null && service.child.signalCode === null) {
    service.child.kill('SIGKILL');
    await service.exited;
  }
  await prometheus?.stop().catch(() => {});
  await alertmanager?.stop().catch(() => {});
  await receiver?.close().catch(() => {});
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The first firing alert named `alertname` delivered at `path`, once it arrives. */
async function delivered(
  path: string,
  alertname: string,
): Promise<{ notification: Notification; alert: WebhookAlert }> {
  return vi.waitFor(
    () => {
      for (const notification of receiver.notifications) {
        if (notification.path !== path) continue;
        const alert = notification.alerts.find(
          (a) => a.labels.alertname === alertname && a.status === 'firing',
        );
        if (alert) return { notification, alert };
      }
      throw new Error(
        `no firing ${alertname} at ${path} yet; got ${JSON.stringify(receiver.notifications.map((n) => [n.path, n.alerts.map((a) => a.labels.alertname)]))}`,
      );
    },
    { timeout: 45_000, interval: 250 },
  );
}

describe('alerts reach the receivers Alertmanager routes them to', () => {
  it('delivers the critical convergence SLO burn to the critical receiver with its labels and annotations', async () => {
    const { notification, alert } = await delivered('/critical', 'OrchestratorConvergenceSLOBurn');
    expect(notification.receiver).toBe('critical');
    expect(['fx_desks', 'rates_desks']).toContain(alert.labels.orchestrator);
    expect(alert.labels).toEqual({
      alertname: 'OrchestratorConvergenceSLOBurn',
      severity: 'critical',
      slo: 'convergence',
      long_window: '30s',
      short_window: '10s',
      job: 'conversation-orchestrator',
      orchestrator: alert.labels.orchestrator as string,
    });
    expect(alert.annotations.summary).toBe(
      "The convergence SLO's error budget is burning too fast.",
    );
    expect(alert.annotations.description).toMatch(
      new RegExp(
        `^Orchestrator ${alert.labels.orchestrator} spends the error budget of its convergence SLO \\(objective: 99% of conversations converge, over 2 minutes\\) \\d+(\\.\\d+)? times as fast as the objective allows over the last 30 seconds, and still over the last 10 seconds \\(threshold 14\\.4x: at that rate 360% of the budget goes in 30 seconds\\)\\. Budget consumed over the last 2 minutes: \\d+(\\.\\d+)?%\\.$`,
      ),
    );
    // A quarter of the conversations fail: the burn is about 25 (0.25 / 0.01).
    const burn = Number(
      / (\d+(?:\.\d+)?) times as fast/.exec(alert.annotations.description ?? '')?.[1],
    );
    expect(burn).toBeGreaterThan(14.4);
    expect(burn).toBeLessThanOrEqual(100);
    expect(alert.annotations.runbook_url).toBe(
      `${config.runbookUrl}#orchestratorconvergencesloburn`,
    );
    const misrouted = receiver.notifications.filter(
      (n) => n.path === '/warning' && n.alerts.some((a) => a.labels.severity === 'critical'),
    );
    expect(misrouted).toEqual([]);
  });

  it('delivers the latency SLO ticket to the warning receiver, and holds back the convergence ticket while its page fires', async () => {
    const { notification, alert } = await delivered(
      '/warning',
      'OrchestratorConvergenceLatencySLOBurn',
    );
    expect(notification.receiver).toBe('warning');
    expect(alert.labels).toMatchObject({
      severity: 'warning',
      slo: 'convergence_latency',
      long_window: '1m',
      short_window: '20s',
      job: 'conversation-orchestrator',
    });
    expect(alert.annotations.description).toContain(
      'SLO (objective: 95% of converged conversations converge within 0.5s, over 2 minutes)',
    );
    // While a page is active its ticket is held back. (The random mix can dip below the page's
    // threshold for a moment, and a ticket seen then is delivered, as it should be.)
    await vi.waitFor(
      async () => {
        const alerts = await alertmanager.alerts();
        const convergence = alerts.filter(
          (a) => a.labels.alertname === 'OrchestratorConvergenceSLOBurn',
        );
        const pages = convergence.filter((a) => a.labels.severity === 'critical');
        const tickets = convergence.filter((a) => a.labels.severity === 'warning');
        expect(tickets.length).toBeGreaterThan(0);
        for (const ticket of tickets) {
          const page = pages.find((p) => p.labels.orchestrator === ticket.labels.orchestrator);
          expect(ticket.status).toMatchObject({
            state: 'suppressed',
            inhibitedBy: [page?.fingerprint],
          });
        }
      },
      { timeout: 30_000, interval: 250 },
    );
  });

  it('pages for a job whose every target is down, and silences its other alerts meanwhile', async () => {
    const slowBefore = (await alertmanager.alerts()).filter(
      (a) => a.labels.alertname === 'OrchestratorConvergenceLatencySLOBurn',
    );
    expect(slowBefore.length).toBeGreaterThan(0);
    expect(slowBefore.map((a) => a.status.state)).toEqual(slowBefore.map(() => 'active'));

    // The only replica dies: the job is down.
    service.child.kill('SIGKILL');
    await service.exited;

    const { alert: down } = await delivered('/critical', 'OrchestratorJobDown');
    expect(down.labels).toEqual({
      alertname: 'OrchestratorJobDown',
      severity: 'critical',
      job: 'conversation-orchestrator',
    });
    // While the job is down its other alerts are still active in Prometheus (their rate windows
    // still hold samples; the per-instance target-down alert fires too), and Alertmanager holds
    // them back: the cause pages, not its echoes.
    await vi.waitFor(
      async () => {
        const alerts = await alertmanager.alerts();
        const jobDown = alerts.find((a) => a.labels.alertname === 'OrchestratorJobDown');
        const targetDown = alerts.filter((a) => a.labels.alertname === 'OrchestratorTargetDown');
        const slow = alerts.filter(
          (a) => a.labels.alertname === 'OrchestratorConvergenceLatencySLOBurn',
        );
        expect(jobDown?.status.state).toBe('active');
        expect(targetDown.map((a) => a.labels.instance)).toEqual([`127.0.0.1:${service.port}`]);
        expect(slow.length).toBeGreaterThan(0);
        for (const a of [...targetDown, ...slow]) {
          expect(a.status).toMatchObject({
            state: 'suppressed',
            inhibitedBy: [jobDown?.fingerprint],
          });
        }
      },
      { timeout: 15_000, interval: 250 },
    );
  });
});
