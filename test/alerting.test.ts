/**
 * Alert delivery, end to end, with real processes: the demo service converging slowly and failing
 * half its conversations, a real Prometheus evaluating rules generated from a test config (short
 * windows and `for:` durations), a real Alertmanager routing with the committed
 * alertmanager/alertmanager.yml (only its webhook URLs and group timers swapped), and a local
 * webhook receiver standing in for the people paged.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parse } from 'yaml';
import { defineOpsConfig } from '../ops/config.ts';
import { yaml } from '../ops/render.ts';
import { rules } from '../ops/rules.ts';
import {
  type Notification,
  type RunningAlertmanager,
  startAlertmanager,
  startWebhookReceiver,
  type WebhookAlert,
  type WebhookReceiver,
} from './helpers/alertmanager.ts';
import { type RunningPrometheus, startPrometheus } from './helpers/prometheus.ts';
import { type RunningService, startService } from './helpers/service.ts';

/** The default config with windows and `for:` durations short enough for a test. */
const config = defineOpsConfig({
  rateWindow: '20s',
  dispatchWindow: '5s',
  slowConvergence: { p95Seconds: 0.5, for: '1s' },
  conversationErrors: { for: '1s' },
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
  // Slow markets converge in ~2 s (p95 above the test's 0.5 s); broken feeds fail half of them.
  service = await startService(['--mix', 'slow=1,fail=1', '--rate', '20', '--progress-s', '60']);
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
  it('delivers OrchestratorSlowConvergence to the warning receiver with its labels and annotations', async () => {
    const { notification, alert } = await delivered('/warning', 'OrchestratorSlowConvergence');
    expect(notification.receiver).toBe('warning');
    expect(['fx_desks', 'rates_desks']).toContain(alert.labels.orchestrator);
    expect(alert.labels).toMatchObject({
      alertname: 'OrchestratorSlowConvergence',
      severity: 'warning',
      job: 'conversation-orchestrator',
      quantile: '0.95',
    });
    expect(alert.annotations.summary).toBe('Conversations are converging slowly.');
    expect(alert.annotations.description).toMatch(
      new RegExp(
        `^95% of the conversations of orchestrator ${alert.labels.orchestrator} that converged took up to \\d+(\\.\\d+)?s over the last 20 seconds \\(threshold 0\\.5s\\)\\.$`,
      ),
    );
    expect(alert.annotations.runbook_url).toBe(`${config.runbookUrl}#orchestratorslowconvergence`);
  });

  it('delivers a critical alert (OrchestratorConversationErrors) to the critical receiver, not the warning one', async () => {
    const { notification, alert } = await delivered('/critical', 'OrchestratorConversationErrors');
    expect(notification.receiver).toBe('critical');
    expect(alert.labels).toMatchObject({ severity: 'critical', job: 'conversation-orchestrator' });
    expect(alert.annotations.runbook_url).toBe(
      `${config.runbookUrl}#orchestratorconversationerrors`,
    );
    const misrouted = receiver.notifications.filter(
      (n) => n.path === '/warning' && n.alerts.some((a) => a.labels.severity === 'critical'),
    );
    expect(misrouted).toEqual([]);
  });

  it('pages for a job whose every target is down, and silences its other alerts meanwhile', async () => {
    const slowBefore = (await alertmanager.alerts()).filter(
      (a) => a.labels.alertname === 'OrchestratorSlowConvergence',
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
        const slow = alerts.filter((a) => a.labels.alertname === 'OrchestratorSlowConvergence');
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
