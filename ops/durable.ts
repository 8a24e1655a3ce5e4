/**
 * Alerts on durable conversations and fleets: the recovery backlog, checkpoint failures, lease
 * conflicts, conversations suspended too long, and BullMQ jobs that stall or wait too long. The
 * store-read gauges (`orchestrator_conversations_unleased`, `orchestrator_oldest_suspended_seconds`,
 * the oldest waiting job) are read by every worker from the one store or queue: the rules take
 * their `max`, never a sum.
 */
import {
  METRIC_CHECKPOINT_FAILURES,
  METRIC_CONVERSATIONS_SUSPENDED,
  METRIC_CONVERSATIONS_UNLEASED,
  METRIC_LEASE_CONFLICTS,
  METRIC_OLDEST_SUSPENDED,
  METRIC_QUEUE_JOBS_STALLED,
  METRIC_QUEUE_OLDEST_WAITING,
  METRIC_STORE_READ_FAILURES,
  METRIC_STORE_UP,
} from '../src/observability/semconv.ts';
import { durationSeconds } from './check.ts';
import type { Duration, OpsConfig } from './config-types.ts';
import { byOrchestrator, humanDuration } from './names.ts';
import { type AlertingRule, alertRule } from './rule-model.ts';

export function durableAlerts(config: OpsConfig): AlertingRule[] {
  const S = config.selector;
  const W = config.rateWindow;
  const O = byOrchestrator(config).join(', ');
  const Q = [...config.groupLabels, 'queue'].join(', ');
  const c = config;
  // The count for the description, asked of Prometheus for the alert's own labels.
  const by = byOrchestrator(config);
  const suspendedMatchers = by.map((l) => `${l}=%q`).join(',');
  const suspendedArgs = by.map((l) => `$labels.${l}`).join(' ');
  // An age gauge (seconds, the max over the workers that read it) above `maxAge`, the config's
  // duration at `path`.
  const olderThan = (labels: string, metric: string, path: string, maxAge: Duration) =>
    `max by (${labels}) (${metric}{${S}})\n  > ${durationSeconds(maxAge)} # ${path} (${maxAge}) in seconds\n`;
  return [
    alertRule(config, {
      alert: 'OrchestratorRecoveryBacklog',
      expr: `max by (${O}) (${METRIC_CONVERSATIONS_UNLEASED}{${S}}) > 0\n`,
      for: c.recoveryBacklog.for,
      severity: 'critical',
      summary: 'Conversations are running in the store but no worker holds them.',
      description:
        'The store of orchestrator {{ $labels.orchestrator }} has {{ $value }} running conversations ' +
        `whose lease no worker holds, for ${humanDuration(c.recoveryBacklog.for)}: nobody recovers them.`,
    }),
    alertRule(config, {
      alert: 'OrchestratorStoreUnreadable',
      // max: a worker that cannot read the store while another can is that worker's problem; the
      // gauges (their max over workers) go blind only when none can.
      expr: `max by (${[...config.groupLabels, 'store'].join(', ')}) (${METRIC_STORE_UP}{${S}}) == 0\n`,
      for: c.storeUnreadable.for,
      severity: 'warning',
      summary: 'No worker can read the conversation store at scrape time.',
      description:
        `No worker's scrape-time read of the {{ $labels.store }} store has answered for ${humanDuration(c.storeUnreadable.for)} ` +
        `(${METRIC_STORE_READ_FAILURES} says whether by timeout or error): the store gauges are missing, ` +
        'so the recovery backlog and suspension alerts cannot fire.',
    }),
    alertRule(config, {
      alert: 'OrchestratorCheckpointFailures',
      expr: `sum by (${O}, store) (rate(${METRIC_CHECKPOINT_FAILURES}{${S}}[${W}])) > 0\n`,
      for: c.checkpointFailures.for,
      severity: 'critical',
      summary: 'Checkpoint commits to the conversation store are failing.',
      description:
        'Orchestrator {{ $labels.orchestrator }} fails {{ $value | printf `%.3g` }} checkpoint commits a second ' +
        `to its {{ $labels.store }} store over the last ${humanDuration(W)}: the conversations cannot be made durable.`,
    }),
    alertRule(config, {
      alert: 'OrchestratorLeaseConflicts',
      expr: [
        `sum by (${O}) (rate(${METRIC_LEASE_CONFLICTS}{${S}}[${W}]))`,
        `  > ${c.leaseConflicts.perSecond} # leaseConflicts.perSecond`,
        '',
      ].join('\n'),
      for: c.leaseConflicts.for,
      severity: 'warning',
      summary: 'Workers keep contesting the leases of conversations.',
      description:
        'Orchestrator {{ $labels.orchestrator }} meets {{ $value | printf `%.3g` }} lease conflicts a second ' +
        `over the last ${humanDuration(W)} (threshold ${c.leaseConflicts.perSecond}): commits of a worker ` +
        'that lost its lease are refused.',
    }),
    alertRule(config, {
      alert: 'OrchestratorSuspendedTooLong',
      expr: olderThan(
        O,
        METRIC_OLDEST_SUSPENDED,
        'suspendedConversations.maxAge',
        c.suspendedConversations.maxAge,
      ),
      for: c.suspendedConversations.for,
      severity: 'warning',
      summary: 'A suspended conversation has waited longer than it should.',
      description:
        'The oldest suspended conversation of orchestrator {{ $labels.orchestrator }} has waited ' +
        `{{ $value | humanizeDuration }} (more than ${humanDuration(c.suspendedConversations.maxAge)}); ` +
        `{{ with printf \`max(${METRIC_CONVERSATIONS_SUSPENDED}{${suspendedMatchers}})\` ${suspendedArgs} | query }}{{ . | first | value }}{{ else }}an unknown number of{{ end }} conversations are suspended.`,
    }),
    alertRule(config, {
      alert: 'OrchestratorQueueJobsStalled',
      expr: `sum by (${Q}) (increase(${METRIC_QUEUE_JOBS_STALLED}{${S}}[${W}])) > 0\n`,
      for: c.queueStalledJobs.for,
      severity: 'warning',
      summary: 'BullMQ keeps finding jobs stalled.',
      description:
        `BullMQ found {{ $value | printf \`%.3g\` }} jobs of queue {{ $labels.queue }} stalled over the last ${humanDuration(W)}: ` +
        'their worker died or blocked its event loop past the lock, and another worker resumes them.',
    }),
    alertRule(config, {
      alert: 'OrchestratorQueueWaitTooLong',
      expr: olderThan(Q, METRIC_QUEUE_OLDEST_WAITING, 'queueWait.maxWait', c.queueWait.maxWait),
      for: c.queueWait.for,
      severity: 'warning',
      summary: 'Jobs wait too long in a BullMQ queue before a worker takes them.',
      description:
        'The oldest waiting job of queue {{ $labels.queue }} has waited {{ $value | humanizeDuration }} ' +
        `(more than ${humanDuration(c.queueWait.maxWait)}): the workers are too few, busy or gone.`,
    }),
  ];
}
