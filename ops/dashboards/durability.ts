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
import {
  build,
  dashboard,
  described,
  labelVariable,
  query,
  RATE,
  selector,
  timeseries,
  UNIT,
} from './common.ts';
import { DURABILITY_UID } from './uids.ts';

export function durabilityDashboard(config: OpsConfig): Dashboard {
  const OI = selector(config, ['orchestrator', 'instance']);
  const QI = selector(config, ['queue', 'instance']);
  const latency = (q: string) =>
    `histogram_quantile(${q}, sum by (orchestrator, store, le) (rate(${METRIC_CHECKPOINT_DURATION}_bucket{${OI}}[${RATE}])))`;
  const snapshotLatency = (q: string) =>
    `histogram_quantile(${q}, sum by (orchestrator, store, le) (rate(${METRIC_CHECKPOINT_SNAPSHOT_DURATION}_bucket{${OI}}[${RATE}])))`;
  const wait = (q: string) =>
    `histogram_quantile(${q}, sum by (queue, instance, le) (rate(${METRIC_QUEUE_JOB_WAIT}_bucket{${QI}}[${RATE}])))`;
  return build(
    dashboard(DURABILITY_UID, 'Conversation orchestrator / Durability', [
      labelVariable('orchestrator', `${METRIC_CHECKPOINT_DURATION}_count{${config.selector}}`),
      labelVariable('queue', `${BULLMQ_METRIC_JOB_COUNT}{${config.selector}}`),
      labelVariable('instance', `up{${config.selector}}`),
    ])
      .withPanel(
        described(
          'Recovery backlog',
          UNIT.conversations,
          `max(${METRIC_CONVERSATIONS_UNLEASED}{${OI}})`,
          'Conversations running in the store whose lease no worker holds (read from the store at scrape time). Above 0 for long: nobody recovers them.',
        ),
      )
      .withPanel(
        described(
          'Suspended conversations',
          UNIT.conversations,
          `sum(max by (orchestrator) (${METRIC_CONVERSATIONS_SUSPENDED}{${OI}}))`,
          'Conversations waiting in the store for resume(), holding no process.',
        ),
      )
      .withPanel(
        described(
          'Oldest suspended',
          UNIT.seconds,
          `max(${METRIC_OLDEST_SUSPENDED}{${OI}})`,
          'How long the oldest suspended conversation has waited.',
        ),
      )
      .withPanel(
        described(
          'Oldest waiting job',
          UNIT.seconds,
          `max(${METRIC_QUEUE_OLDEST_WAITING}{${QI}})`,
          'How long the oldest job of the queues has waited for a worker.',
        ),
      )
      .withPanel(
        timeseries('Checkpoint commits per second by store', UNIT.commitsPerSecond, 12)
          .description(
            'Commits (each writes the whole state, or on a store with entries what the dispatches added) and failed commits.',
          )
          .withTarget(
            query(
              `sum by (orchestrator, store) (rate(${METRIC_CHECKPOINT_DURATION}_count{${OI}}[${RATE}]))`,
              { legend: '{{orchestrator}} / {{store}}' },
            ),
          )
          .withTarget(
            query(
              `sum by (orchestrator, store) (rate(${METRIC_CHECKPOINT_FAILURES}{${OI}}[${RATE}]))`,
              { refId: 'B', legend: '{{orchestrator}} / {{store}} failed' },
            ),
          ),
      )
      .withPanel(
        timeseries('Checkpoint commit latency (p50 / p99) by store', UNIT.seconds, 12)
          .withTarget(query(latency('0.5'), { legend: 'p50 {{orchestrator}} / {{store}}' }))
          .withTarget(
            query(latency('0.99'), { refId: 'B', legend: 'p99 {{orchestrator}} / {{store}}' }),
          ),
      )
      .withPanel(
        timeseries('Checkpoint bytes written per second by kind', UNIT.bytesPerSecond, 12)
          .description(
            'whole: whole states (small states, suspensions, endings); entry: what the dispatches added since the last commit; snapshot: the whole state, written now and then beside the loop. The dashed lines: mean bytes per write.',
          )
          .withTarget(
            query(
              `sum by (orchestrator, store, kind) (rate(${METRIC_CHECKPOINT_SIZE}_sum{${OI}}[${RATE}]))`,
              { legend: '{{orchestrator}} / {{store}} / {{kind}}' },
            ),
          )
          .withTarget(
            query(
              `sum by (orchestrator, store, kind) (rate(${METRIC_CHECKPOINT_SIZE}_sum{${OI}}[${RATE}])) / sum by (orchestrator, store, kind) (rate(${METRIC_CHECKPOINT_SIZE}_count{${OI}}[${RATE}]))`,
              { refId: 'B', legend: '{{orchestrator}} / {{store}} / {{kind}} per write' },
            ),
          ),
      )
      .withPanel(
        timeseries('Snapshot latency (p50 / p99) and failures by store', UNIT.seconds, 12)
          .description(
            'One snapshot write (beside the loop, which does not wait for it). A failing snapshot leaves the log growing: resumes fold more entries until one lands.',
          )
          .withTarget(query(snapshotLatency('0.5'), { legend: 'p50 {{orchestrator}} / {{store}}' }))
          .withTarget(
            query(snapshotLatency('0.99'), {
              refId: 'B',
              legend: 'p99 {{orchestrator}} / {{store}}',
            }),
          )
          .withTarget(
            query(
              `sum by (orchestrator, store) (increase(${METRIC_CHECKPOINT_SNAPSHOT_FAILURES}{${OI}}[${RATE}]))`,
              { refId: 'C', legend: '{{orchestrator}} / {{store}} failed snapshots' },
            ),
          ),
      )
      .withPanel(
        timeseries('Resumes per second by cause', UNIT.conversationsPerSecond, 12)
          .description(
            'crash: recovered after a worker died; abort: the run before was aborted inside a step (its cut call runs again); suspend: resume() after a suspension; handoff: another worker took a released conversation. A cancel() is not a resume: it is counted as an aborted ending.',
          )
          .withTarget(
            query(
              `sum by (orchestrator, cause) (rate(${METRIC_CONVERSATIONS_RESUMED}{${OI}}[${RATE}]))`,
              { legend: '{{orchestrator}} / {{cause}}' },
            ),
          ),
      )
      .withPanel(
        timeseries('Re-invocations per second by responder', UNIT.dispatchesPerSecond, 12)
          .description(
            'Responder calls run again after a crash (at least once: same idempotencyKey, higher attempt).',
          )
          .withTarget(
            query(
              `sum by (orchestrator, responder) (rate(${METRIC_RESPONDER_REINVOCATIONS}{${OI}}[${RATE}]))`,
              { legend: '{{orchestrator}} / {{responder}}' },
            ),
          ),
      )
      .withPanel(
        timeseries('Lease conflicts per second', UNIT.conflictsPerSecond, 12).withTarget(
          query(`sum by (orchestrator) (rate(${METRIC_LEASE_CONFLICTS}{${OI}}[${RATE}]))`, {
            legend: '{{orchestrator}}',
          }),
        ),
      )
      .withPanel(
        timeseries('Suspended conversations and recovery backlog', UNIT.conversations, 12)
          .withTarget(
            query(`max by (orchestrator) (${METRIC_CONVERSATIONS_SUSPENDED}{${OI}})`, {
              legend: '{{orchestrator}} suspended',
            }),
          )
          .withTarget(
            query(`max by (orchestrator) (${METRIC_CONVERSATIONS_UNLEASED}{${OI}})`, {
              refId: 'B',
              legend: '{{orchestrator}} unleased',
            }),
          ),
      )
      .withPanel(
        timeseries('Oldest suspended conversation age', UNIT.seconds, 12).withTarget(
          query(`max by (orchestrator) (${METRIC_OLDEST_SUSPENDED}{${OI}})`, {
            legend: '{{orchestrator}}',
          }),
        ),
      )
      .withPanel(
        timeseries('Queue depth by state', UNIT.jobs, 12)
          .description(
            "BullMQ's own counts (queue.exportPrometheusMetrics()), the same on every worker.",
          )
          .withTarget(
            query(
              `max by (queue, state) (${BULLMQ_METRIC_JOB_COUNT}{${QI},state=~"waiting|active|delayed|prioritized|failed"})`,
              {
                legend: '{{queue}} / {{state}}',
              },
            ),
          ),
      )
      .withPanel(
        timeseries('Job wait time per worker (p50 / p95)', UNIT.seconds, 12)
          .description('How long a job waited in its queue before this worker took it.')
          .withTarget(query(wait('0.5'), { legend: 'p50 {{queue}} / {{instance}}' }))
          .withTarget(query(wait('0.95'), { refId: 'B', legend: 'p95 {{queue}} / {{instance}}' })),
      )
      .withPanel(
        timeseries('Oldest waiting job by queue', UNIT.seconds, 12).withTarget(
          query(`max by (queue) (${METRIC_QUEUE_OLDEST_WAITING}{${QI}})`, { legend: '{{queue}}' }),
        ),
      ),
  );
}
