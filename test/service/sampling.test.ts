import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { attrs, startOtlpReceiver } from '../helpers/otlp-receiver.ts';
import {
  type RunningService,
  runServiceCommand,
  startService,
  stopService,
  sumSamples,
} from '../helpers/service.ts';
import { BRISK_LOAD } from '../helpers/service-load.ts';

let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
let service: RunningService | undefined;
let metrics = '';
let exitCode: number | null = null;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  // Ratio 0: of the conversations that converged, none is kept (none runs 5 s in this window).
  service = await startService(
    // The default mix without approvals and traders leaving: a conversation that suspends, or
    // whose durable run is aborted (handed off), ends a segment, which the sampler decides by its
    // ratio (docs/sampling.md), so it would be dropped without converging.
    [
      ...BRISK_LOAD,
      '--sample-ratio',
      '0',
      '--mix',
      'converge=65,slow=10,lagging=7,never=6,timeout=2,fail=5',
    ],
    // Batches every 500 ms: exemplars are written once their trace's batch is delivered.
    { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '500' },
  );
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const res = await fetch(`${service.url}/metrics`, {
    headers: { accept: 'application/openmetrics-text' },
  });
  metrics = await res.text();
  service.child.kill('SIGTERM');
  exitCode = await service.exited;
}, 60_000);

afterAll(async () => {
  await stopService(service);
  await receiver.close();
});

describe('the demo service samples its traces', () => {
  it('says what it keeps when it starts', () => {
    expect(service?.stdout()).toContain(
      'traces kept: every failed or unconverged conversation, slower than 5000 ms, and 0% of the rest (--sample-ratio)',
    );
    expect(exitCode).toBe(0);
  });

  it('counts its decisions on /metrics: converged conversations dropped, the others kept', () => {
    const dropped = sumSamples(metrics, 'orchestrator_sampler_decisions_total', {
      decision: 'drop',
    });
    const kept = sumSamples(metrics, 'orchestrator_sampler_decisions_total', { decision: 'keep' });
    expect(dropped).toBeGreaterThan(0);
    expect(kept).toBeGreaterThan(0);
    const converged = sumSamples(metrics, 'orchestrator_conversations_ended_total', {
      reason: 'converged',
    });
    // Every converged conversation was dropped (ratio 0, none slow), and only those.
    expect(dropped).toBe(converged);
    expect(metrics).toContain('orchestrator_sampler_spans_lost_total{limit="total"} 0');
  });

  it('exports no converged conversation and every other one, their exemplars only of exported traces', () => {
    const conversations = receiver.spans.filter((s) => s.name.startsWith('invoke_workflow '));
    expect(conversations.length).toBeGreaterThan(0);
    const reasons = new Set(
      conversations.map((s) => attrs(s.attributes)['conversation.end.reason']),
    );
    expect(reasons.has('converged')).toBe(false);
    // Each exported reason is one the service counted ending (the mix of reasons in a short run
    // varies: one run exported a single reason besides converged, which a count of reasons failed).
    for (const reason of reasons) {
      expect(
        sumSamples(metrics, 'orchestrator_conversations_ended_total', { reason: String(reason) }),
        String(reason),
      ).toBeGreaterThan(0);
    }
    const exported = new Set(receiver.spans.map((s) => s.traceId));
    const exemplars = [...metrics.matchAll(/# \{trace_id="([0-9a-f]{32})"\}/g)].map((m) => m[1]);
    expect(exemplars.length).toBeGreaterThan(0);
    for (const id of exemplars) expect(exported.has(id as string)).toBe(true);
  });

  it('refuses a ratio outside 0-1', async () => {
    const r = await runServiceCommand(['--sample-ratio', '1.5']);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('Expected --sample-ratio to be a number from 0 to 1, got `1.5`');
  });
});

describe('the demo service whose OTLP endpoint refuses every connection', () => {
  it('puts no trace_id exemplar on /metrics: none of its traces could be opened', async () => {
    // A port nothing listens on: every export fails with ECONNREFUSED.
    const refused = await startService(
      ['--rate', '60', '--concurrency', '16', '--latency-ms', '1', '--sample-ratio', '1'],
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_BSP_SCHEDULE_DELAY: '100' },
    );
    try {
      // Until the exporter has given up on a batch (its retries take a few seconds).
      await vi.waitFor(
        () =>
          expect(refused.stdout() + refused.stderr()).toMatch(
            /span export failing: .*ECONNREFUSED/,
          ),
        { timeout: 30_000, interval: 200 },
      );
      const text = await (
        await fetch(`${refused.url}/metrics`, {
          headers: { accept: 'application/openmetrics-text' },
        })
      ).text();
      // It did record conversations (exemplars would have had somewhere to go) and fail exports.
      expect(sumSamples(text, 'orchestrator_conversations_ended_total')).toBeGreaterThan(10);
      expect(refused.stdout() + refused.stderr()).toMatch(/span export failing: .*ECONNREFUSED/);
      expect([...text.matchAll(/trace_id="([0-9a-f]{32})"/g)]).toEqual([]);
    } finally {
      await stopService(refused);
    }
  }, 60_000);
});
