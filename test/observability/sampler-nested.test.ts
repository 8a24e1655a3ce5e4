/**
 * The sampler with nested conversations (issue 31, "the sampler's holes today"): an outer
 * conversation whose responder runs thousands of inner ones. Every span counts against the
 * bounds, the inner conversation spans included, and an inner conversation of a kept trace gets
 * its exemplars once the trace is kept and delivered (never when it is dropped).
 */
import { trace } from '@opentelemetry/api';
import type { OpenMetricsContentType, Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { maxDispatches, stopWhen, type TerminationPolicy } from '../../src/index.ts';
import {
  type ConversationSamplerOptions,
  createConversationTelemetry,
} from '../../src/observability/index.ts';
import { numberConversation } from '../helpers/number-conversation.ts';
import { restoreTracing } from '../helpers/tracing.ts';
import { openMetricsRegistry, sampledDeliveredTracing } from './delivered-tracing.ts';

afterEach(restoreTracing);

function sampled(options: Partial<ConversationSamplerOptions>) {
  const registry = openMetricsRegistry();
  const { exporter, sampler, provider } = sampledDeliveredTracing(registry, options);
  const telemetry = createConversationTelemetry<number, number>({ registry });
  return { exporter, registry, sampler, telemetry, provider };
}

/** A conversation of two dispatches that converges. */
function innerOrchestrator(telemetry: ReturnType<typeof sampled>['telemetry']) {
  return numberConversation('inner', {
    responders: ['quote'],
    termination: stopWhen((s) => s.projection >= 2, 'converged'),
    observers: [telemetry],
  });
}

/**
 * An outer conversation of one dispatch whose responder runs `inner` conversations, one after
 * the other, and reads `during()` before answering.
 */
function outerOrchestrator(
  telemetry: ReturnType<typeof sampled>['telemetry'],
  inner: number,
  termination: TerminationPolicy<number, number>,
  during: () => void | Promise<void>,
) {
  const innerConversations = innerOrchestrator(telemetry);
  return numberConversation('outer', {
    responders: [
      {
        name: 'desk',
        respond: async (m) => {
          for (let i = 0; i < inner; i++)
            await innerConversations.run({ sender: 'desk', content: i });
          await during();
          return { sender: 'desk', content: m.content + 1 };
        },
      },
    ],
    termination,
    observers: [telemetry],
  });
}

/**
 * Runs an outer conversation of one dispatch running `inner` conversations under a sampler of
 * `options`; answers the sampled parts and what the sampler buffered as the outer one answered.
 */
async function bufferedWhileNested(options: Partial<ConversationSamplerOptions>, inner: number) {
  const parts = sampled(options);
  let buffered = -1;
  await outerOrchestrator(parts.telemetry, inner, maxDispatches(1), () => {
    buffered = parts.sampler.bufferedSpans;
  }).run({ sender: 'user', content: 0 });
  return { ...parts, buffered };
}

async function lost(registry: Registry<OpenMetricsContentType>): Promise<Record<string, number>> {
  const metric = await registry.getSingleMetric('orchestrator_sampler_spans_lost_total')?.get();
  return Object.fromEntries((metric?.values ?? []).map((v) => [String(v.labels.limit), v.value]));
}

/** The exemplar trace ids on `orchestrator_conversation_duration_seconds_bucket` lines of one orchestrator. */
function durationExemplars(text: string, orchestrator: string): string[] {
  const ids: string[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('orchestrator_conversation_duration_seconds_bucket{')) continue;
    if (!line.includes(`orchestrator="${orchestrator}"`)) continue;
    const m = /# \{trace_id="([0-9a-f]{32})"\}/.exec(line);
    if (m) ids.push(m[1] as string);
  }
  return ids;
}

describe('nested conversations and the sampler', () => {
  it('buffers at most maxSpansPerTrace of an outer conversation running 3,000 inner ones, and counts the rest lost', async () => {
    const { exporter, registry, sampler, buffered } = await bufferedWhileNested(
      { ratio: 1, maxSpansPerTrace: 100 },
      3000,
    );
    // Before the fix, every inner conversation span was buffered: 3,000, none counted lost.
    expect(buffered).toBe(100);
    expect(await lost(registry)).toEqual({ trace: 2900, total: 0 });
    const spans = exporter.getFinishedSpans();
    expect(spans).toHaveLength(101);
    const outer = spans.find((s) => s.name === 'invoke_workflow outer');
    expect(outer?.attributes['conversation.sampler.spans_lost']).toBe(2900);
    expect(sampler.bufferedSpans).toBe(0);
  });

  it('holds maxBufferedSpans across every trace with nested conversations', async () => {
    const { registry, buffered } = await bufferedWhileNested(
      { ratio: 1, maxBufferedSpans: 50 },
      1000,
    );
    expect(buffered).toBe(50);
    expect(await lost(registry)).toEqual({ trace: 0, total: 950 });
  });

  it('gives the inner conversations of a kept trace their exemplars once the trace is kept and delivered', async () => {
    // ratio 0: the trace is kept only because the outer conversation ends unconverged
    // (max_dispatches, a kept reason); the inner ones converge, ending before that decision.
    const { registry, telemetry, provider } = sampled({ ratio: 0 });
    let traceId = '';
    let whileUndecided: string[] = ['not read'];
    await outerOrchestrator(telemetry, 3, maxDispatches(1), async () => {
      traceId = trace.getActiveSpan()?.spanContext().traceId ?? '';
      whileUndecided = durationExemplars(await registry.metrics(), 'inner');
    }).run({ sender: 'user', content: 0 });
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    // While the outer conversation runs the trace is undecided: no exemplar yet.
    expect(whileUndecided).toEqual([]);
    await provider.forceFlush();
    const text = await registry.metrics();
    expect(new Set(durationExemplars(text, 'inner'))).toEqual(new Set([traceId]));
    expect(durationExemplars(text, 'outer')).toEqual([traceId]);
    // The inner responder's dispatch exemplars too.
    expect(text).toMatch(
      new RegExp(
        `orchestrator_dispatch_duration_seconds_bucket\\{[^}]*orchestrator="inner"[^}]*\\} \\d+ # \\{trace_id="${traceId}"\\}`,
      ),
    );
  });

  it('gives the inner conversations of a dropped trace no exemplars', async () => {
    const { registry, telemetry } = sampled({ ratio: 0 });
    await outerOrchestrator(
      telemetry,
      3,
      stopWhen((s) => s.projection >= 1, 'converged'),
      () => {},
    ).run({ sender: 'user', content: 0 });
    const text = await registry.metrics();
    expect(durationExemplars(text, 'inner')).toEqual([]);
    expect(durationExemplars(text, 'outer')).toEqual([]);
    expect(text).toContain('orchestrator_sampler_decisions_total{decision="drop",rule="ratio"} 1');
  });
});
