import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_OPS_CONFIG } from '../../ops/config.ts';
import { METRIC_CONVERSATION_TOKENS, METRIC_TOKENS } from '../../ops/usage.ts';
import {
  dashboardQueries,
  interpolate,
  ruleFiles,
  rules,
  variableSelector,
} from '../helpers/ops.ts';
import { startOtlpReceiver } from '../helpers/otlp-receiver.ts';
import { type RunningPrometheus, startPrometheus } from '../helpers/prometheus.ts';
import { type RunningService, startService } from '../helpers/service.ts';

/** Panels that must show data after a short run of the demo workload. */
const CORE_PANELS = [
  'Conversations ended / s',
  'Share converged',
  'In progress',
  'Conversations ended per second by reason',
  'Time to converge (p50 / p95 / p99)',
  'Dispatches per conversation',
  'Share converged by orchestrator',
  'Dispatches per second by orchestrator',
  'Dispatch rate by responder',
  'Dispatch latency p95 by responder',
  'Dispatch latency distribution',
  // The service tail-samples its traces when it exports them (this test gives it a receiver).
  'Tail sampler decisions per second by rule',
];

type Vector = { resultType: string; result: unknown[] };

let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
let service: RunningService;
let prometheus: RunningPrometheus;
const startedAt = Date.now() / 1000;

/**
 * The usage metrics (issue 19) appear once the service's desks report tokens. Until then the
 * rules over them are checked on synthetic series (test/ops/usage.test.ts); once the service
 * exposes them, they must produce series here too.
 */
const USAGE_SERIES = [METRIC_TOKENS, `${METRIC_CONVERSATION_TOKENS}_bucket`];
let servesUsage = false;

/** The recording rules that must produce series from what the service exposes. */
function expectedRecords(): string[] {
  return [
    ...new Set(
      rules().flatMap((r) =>
        r.record && (servesUsage || !USAGE_SERIES.some((m) => r.expr.includes(m)))
          ? [r.record]
          : [],
      ),
    ),
  ];
}

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  service = await startService(
    ['--rate', '30', '--concurrency', '16', '--latency-ms', '2', '--progress-s', '5'],
    {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '500',
    },
  );
  prometheus = await startPrometheus(`127.0.0.1:${service.port}`, ruleFiles());
  // Wait until every recording rule has produced a series with a number (rates need a few
  // scrapes; a ratio is NaN while its window saw no ending, which a loaded machine can make last).
  const deadline = Date.now() + 90_000;
  for (;;) {
    const usage = await prometheus.query<Vector>('/api/v1/query', {
      query: `count({__name__=~"${USAGE_SERIES.join('|')}"})`,
    });
    servesUsage = usage.data.result.length > 0;
    const found = await Promise.all(
      expectedRecords().map(async (name) => {
        // `>= 0` drops NaN samples (every recorded value is a rate or a ratio of rates).
        const r = await prometheus.query<Vector>('/api/v1/query', {
          query: `count({__name__="${name}"} >= 0)`,
        });
        return r.data.result.length > 0;
      }),
    );
    if (found.every(Boolean)) break;
    if (Date.now() > deadline) break; // the test below names the missing ones
    await new Promise((r) => setTimeout(r, 1000));
  }
}, 120_000);

afterAll(async () => {
  if (service && service.child.exitCode === null) {
    service.child.kill('SIGKILL');
    await service.exited;
  }
  await prometheus?.stop();
  await receiver?.close().catch(() => {});
});

describe('against a real Prometheus scraping the service', () => {
  it('scrapes the service as a healthy target over OpenMetrics', async () => {
    const targets = await prometheus.query<{
      activeTargets: { health: string; lastError: string }[];
    }>('/api/v1/targets');
    expect(targets.data.activeTargets.map((t) => [t.health, t.lastError])).toEqual([['up', '']]);
    const up = await prometheus.query<Vector>('/api/v1/query', {
      query: 'up{job="conversation-orchestrator"}',
    });
    expect(up.data.result).toHaveLength(1);
  });

  it('evaluates every dashboard query without error, and the core panels have data', async () => {
    const empty: string[] = [];
    for (const q of dashboardQueries()) {
      const selector = variableSelector(q.expr);
      if (selector !== undefined) {
        const r = await prometheus.query<unknown[]>('/api/v1/series', {
          'match[]': interpolate(selector),
          start: String(startedAt),
        });
        expect(r.status, `${q.dashboard} ${q.panel}: ${r.error}`).toBe('success');
        // BullMQ's queue metrics exist only where a fleet runs (not this single-process service).
        const fleetOnly = selector.startsWith('bullmq_');
        if (r.data.length === 0 && !fleetOnly) empty.push(`${q.dashboard} / ${q.panel}`);
        continue;
      }
      const r = await prometheus.query<Vector>('/api/v1/query', { query: interpolate(q.expr) });
      expect(r.status, `${q.dashboard} / ${q.panel}: ${r.error}`).toBe('success');
      const result = r.data.result as { value: [number, string] }[];
      const hasData = result.some((s) => s.value[1] !== 'NaN');
      // Every SLO panel reads recording rules that exist once conversations end.
      const core = CORE_PANELS.includes(q.panel) || q.dashboard === 'orchestrator-slo';
      if (core && !hasData) empty.push(`${q.dashboard} / ${q.panel}: ${q.expr}`);
    }
    expect(empty).toEqual([]);
  });

  it('evaluates every rule without error, and every recording rule produces series', async () => {
    const groups = await prometheus.query<{
      groups: { rules: { name: string; type: string; health: string; lastError?: string }[] }[];
    }>('/api/v1/rules');
    const all = groups.data.groups.flatMap((g) => g.rules);
    expect(all.length).toBe(rules().length);
    expect(
      all.filter((r) => r.health !== 'ok').map((r) => `${r.name}: ${r.health} ${r.lastError}`),
    ).toEqual([]);
    const missing: string[] = [];
    for (const name of expectedRecords()) {
      const r = await prometheus.query<Vector>('/api/v1/query', { query: `{__name__="${name}"}` });
      if (r.data.result.length === 0) missing.push(name);
    }
    expect(missing).toEqual([]);
  });

  it('exposes the conversation duration buckets the ops config names, so the latency threshold is a real boundary', async () => {
    const r = await prometheus.query<Vector>('/api/v1/query', {
      query: 'count by (le) (orchestrator_conversation_duration_seconds_bucket)',
    });
    const bounds = (r.data.result as { metric: { le: string } }[]).map((s) => s.metric.le);
    expect(
      bounds
        .filter((le) => le !== '+Inf')
        .map(Number)
        .sort((a, b) => a - b),
    ).toEqual(DEFAULT_OPS_CONFIG.conversationDurationBuckets);
    expect(bounds).toContain(String(DEFAULT_OPS_CONFIG.slos.convergenceLatency.thresholdSeconds));
  });

  it('stores exemplars whose trace ids are traces the service exported over OTLP', async () => {
    const now = Date.now() / 1000;
    const exemplars = await prometheus.query<{ exemplars: { labels: { trace_id?: string } }[] }[]>(
      '/api/v1/query_exemplars',
      {
        query:
          'orchestrator_dispatch_duration_seconds_bucket or orchestrator_conversation_duration_seconds_bucket',
        start: String(startedAt - 60),
        end: String(now + 60),
      },
    );
    expect(exemplars.status).toBe('success');
    const traceIds = new Set(
      exemplars.data.flatMap((s) => s.exemplars.map((e) => e.labels.trace_id)),
    );
    expect(traceIds.size).toBeGreaterThan(0);
    for (const id of traceIds) expect(id).toMatch(/^[0-9a-f]{32}$/);

    // Stop the service: in-flight conversations are aborted and every span is flushed.
    service.child.kill('SIGTERM');
    expect(await service.exited).toBe(0);
    const exported = new Set(receiver.spans.map((s) => s.traceId));
    const unknown = [...traceIds].filter((id) => !exported.has(id as string));
    expect(unknown).toEqual([]);
  });
});
