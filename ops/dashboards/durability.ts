/**
 * Conversation orchestrator / Durability: what keeps conversations alive across crashes,
 * suspensions and workers. Checkpoint commits per second and their latency by store, the bytes
 * they write by kind (whole, entry, snapshot), snapshot latency and failures, resumes by
 * cause, dispatches run again after a crash, lease conflicts, the recovery backlog, suspended
 * conversations and the oldest one's age, and the BullMQ queues: depth by state and how long
 * jobs wait, per worker. The store-read gauges are the same on every worker: panels take their
 * `max`, never a sum.
 */
import type { Dashboard } from '@grafana/grafana-foundation-sdk/dashboard';
import {
  BULLMQ_METRIC_JOB_COUNT,
  METRIC_CHECKPOINT_DURATION,
  METRIC_CHECKPOINT_FAILURES,
  METRIC_CHECKPOINT_SIZE,
  METRIC_CHECKPOINT_SNAPSHOT_DURATION,
  METRIC_CHECKPOINT_SNAPSHOT_FAILURES,
  METRIC_CONVERSATIONS_RESUMED,
  METRIC_CONVERSATIONS_SUSPENDED,
  METRIC_CONVERSATIONS_UNLEASED,
  METRIC_LEASE_CONFLICTS,
  METRIC_OLDEST_SUSPENDED,
  METRIC_QUEUE_JOB_WAIT,
  METRIC_QUEUE_OLDEST_WAITING,
  METRIC_RESPONDER_REINVOCATIONS,
} from '../../src/observability/semconv.ts';
import type { OpsConfig } from '../config-types.ts';
import { build, dashboard, described, labelVariable, quantiles, series, UNIT } from './common.ts';
import { histogramQuantile, RATE, selector } from './promql.ts';
import { DURABILITY_UID } from './uids.ts';

export function durabilityDashboard(config: OpsConfig): Dashboard {
  const OI = selector(config, ['orchestrator', 'instance']);
  const QI = selector(config, ['queue', 'instance']);
  const latency = (q: string) =>
    histogramQuantile(q, METRIC_CHECKPOINT_DURATION, OI, ['orchestrator', 'store']);
  const snapshotLatency = (q: string) =>
    histogramQuantile(q, METRIC_CHECKPOINT_SNAPSHOT_DURATION, OI, ['orchestrator', 'store']);
  const wait = (q: string) =>
    histogramQuantile(q, METRIC_QUEUE_JOB_WAIT, QI, ['queue', 'instance']);
  const byStore = '{{orchestrator}} / {{store}}';
  const byKind = '{{orchestrator}} / {{store}} / {{kind}}';
  const bytes = (part: 'sum' | 'count') =>
    `sum by (orchestrator, store, kind) (rate(${METRIC_CHECKPOINT_SIZE}_${part}{${OI}}[${RATE}]))`;
  return build(
    dashboard(DURABILITY_UID, 'Conversation orchestrator / Durability', [
      labelVariable('orchestrator', `${METRIC_CHECKPOINT_DURATION}_count{${config.selector}}`),
      labelVariable('queue', `${BULLMQ_METRIC_JOB_COUNT}{${config.selector}}`),
      labelVariable('instance', `up{${config.selector}}`),
    ]),
    [
      described(
        'Recovery backlog',
        UNIT.conversations,
        `max(${METRIC_CONVERSATIONS_UNLEASED}{${OI}})`,
        'Conversations running in the store whose lease no worker holds (read from the store at scrape time). Above 0 for long: nobody recovers them.',
      ),
      described(
        'Suspended conversations',
        UNIT.conversations,
        `sum(max by (orchestrator) (${METRIC_CONVERSATIONS_SUSPENDED}{${OI}}))`,
        'Conversations waiting in the store for resume(), holding no process.',
      ),
      described(
        'Oldest suspended',
        UNIT.seconds,
        `max(${METRIC_OLDEST_SUSPENDED}{${OI}})`,
        'How long the oldest suspended conversation has waited.',
      ),
      described(
        'Oldest waiting job',
        UNIT.seconds,
        `max(${METRIC_QUEUE_OLDEST_WAITING}{${QI}})`,
        'How long the oldest job of the queues has waited for a worker.',
      ),
      series(
        'Checkpoint commits per second by store',
        UNIT.commitsPerSecond,
        12,
        [
          [
            `sum by (orchestrator, store) (rate(${METRIC_CHECKPOINT_DURATION}_count{${OI}}[${RATE}]))`,
            byStore,
          ],
          [
            `sum by (orchestrator, store) (rate(${METRIC_CHECKPOINT_FAILURES}{${OI}}[${RATE}]))`,
            `${byStore} failed`,
          ],
        ],
        'Commits (each writes the whole state, or on a store with entries what the dispatches added) and failed commits.',
      ),
      series(
        'Checkpoint commit latency (p50 / p99) by store',
        UNIT.seconds,
        12,
        quantiles(['0.5', '0.99'], latency, byStore),
      ),
      series(
        'Checkpoint bytes written per second by kind',
        UNIT.bytesPerSecond,
        12,
        [
          [bytes('sum'), byKind],
          [`${bytes('sum')} / ${bytes('count')}`, `${byKind} per write`],
        ],
        'whole: whole states (small states, suspensions, endings); entry: what the dispatches added since the last commit; snapshot: the whole state, written now and then beside the loop. The dashed lines: mean bytes per write.',
      ),
      series(
        'Snapshot latency (p50 / p99) and failures by store',
        UNIT.seconds,
        12,
        [
          ...quantiles(['0.5', '0.99'], snapshotLatency, byStore),
          [
            `sum by (orchestrator, store) (increase(${METRIC_CHECKPOINT_SNAPSHOT_FAILURES}{${OI}}[${RATE}]))`,
            `${byStore} failed snapshots`,
          ],
        ],
        'One snapshot write (beside the loop, which does not wait for it). A failing snapshot leaves the log growing: resumes fold more entries until one lands.',
      ),
      series(
        'Resumes per second by cause',
        UNIT.conversationsPerSecond,
        12,
        [
          [
            `sum by (orchestrator, cause) (rate(${METRIC_CONVERSATIONS_RESUMED}{${OI}}[${RATE}]))`,
            '{{orchestrator}} / {{cause}}',
          ],
        ],
        'crash: recovered after a worker died; abort: the run before was aborted inside a step (its cut call runs again); suspend: resume() after a suspension; handoff: another worker took a released conversation. A cancel() is not a resume: it is counted as an aborted ending.',
      ),
      series(
        'Re-invocations per second by responder',
        UNIT.dispatchesPerSecond,
        12,
        [
          [
            `sum by (orchestrator, responder) (rate(${METRIC_RESPONDER_REINVOCATIONS}{${OI}}[${RATE}]))`,
            '{{orchestrator}} / {{responder}}',
          ],
        ],
        'Responder calls run again after a crash (at least once: same idempotencyKey, higher attempt).',
      ),
      series('Lease conflicts per second', UNIT.conflictsPerSecond, 12, [
        [
          `sum by (orchestrator) (rate(${METRIC_LEASE_CONFLICTS}{${OI}}[${RATE}]))`,
          '{{orchestrator}}',
        ],
      ]),
      series('Suspended conversations and recovery backlog', UNIT.conversations, 12, [
        [
          `max by (orchestrator) (${METRIC_CONVERSATIONS_SUSPENDED}{${OI}})`,
          '{{orchestrator}} suspended',
        ],
        [
          `max by (orchestrator) (${METRIC_CONVERSATIONS_UNLEASED}{${OI}})`,
          '{{orchestrator}} unleased',
        ],
      ]),
      series('Oldest suspended conversation age', UNIT.seconds, 12, [
        [`max by (orchestrator) (${METRIC_OLDEST_SUSPENDED}{${OI}})`, '{{orchestrator}}'],
      ]),
      series(
        'Queue depth by state',
        UNIT.jobs,
        12,
        [
          [
            `max by (queue, state) (${BULLMQ_METRIC_JOB_COUNT}{${QI},state=~"waiting|active|delayed|prioritized|failed"})`,
            '{{queue}} / {{state}}',
          ],
        ],
        "BullMQ's own counts (queue.exportPrometheusMetrics()), the same on every worker.",
      ),
      series(
        'Job wait time per worker (p50 / p95)',
        UNIT.seconds,
        12,
        quantiles(['0.5', '0.95'], wait, '{{queue}} / {{instance}}'),
        'How long a job waited in its queue before this worker took it.',
      ),
      series('Oldest waiting job by queue', UNIT.seconds, 12, [
        [`max by (queue) (${METRIC_QUEUE_OLDEST_WAITING}{${QI}})`, '{{queue}}'],
      ]),
    ],
  );
}
