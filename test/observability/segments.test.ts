/**
 * Segments of a durable conversation in one process: a suspension resumed later, a handoff (an
 * aborted durable run resumed), the sampler across segments, the durable metrics and the store's
 * gauges. Spans go to a real OTLP/HTTP receiver.
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type ConversationObserver,
  ConversationOrchestrator,
  type ConversationStore,
  createMemoryStore,
  type StoreStats,
} from '../../src/index.ts';
import {
  createConversationSampler,
  createConversationTelemetry,
  createStoreMetrics,
} from '../../src/observability/index.ts';
import { counter, plusOne } from '../helpers/counter.ts';
import { attrs, type OtlpSpan, startOtlpReceiver } from '../helpers/otlp-receiver.ts';
import { restoreTracing } from '../helpers/tracing.ts';

let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
beforeAll(async () => {
  receiver = await startOtlpReceiver();
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
});
afterAll(() => receiver.close());
afterEach(restoreTracing);

/** A conversation of `steps` dispatches whose responder `b` suspends on message 3 (once). */
function orchestrator(
  store: ConversationStore,
  observers: ConversationObserver<number, number>[],
  options: { steps?: number; onStep?: (n: number) => void; delayMs?: number } = {},
) {
  const delay = options.delayMs;
  return new ConversationOrchestrator<number, number>(
    counter('segments', {
      store,
      observers,
      ...(options.steps === undefined ? {} : { steps: options.steps }),
      step: (_who, m) => {
        options.onStep?.(m.content + 1);
        const answer = plusOne(m);
        return delay === undefined
          ? answer
          : new Promise((r) => setTimeout(() => r(answer), delay));
      },
    }),
  );
}

function tracing(sampler?: {
  ratio: number;
  maxDecisionDelayMs?: number;
  keepReasons?: string[];
  registry?: Registry;
}) {
  const exporter = new SimpleSpanProcessor({
    exporter: new OTLPTraceExporter({ url: `${receiver.url}/v1/traces` }),
  });
  const provider = new TracerProvider({
    spanProcessors: [
      sampler === undefined ? exporter : createConversationSampler({ next: exporter, ...sampler }),
    ],
  });
  return provider;
}

const segmentsOf = (id: string): OtlpSpan[] =>
  receiver.spans
    .filter(
      (s) =>
        s.name === 'invoke_workflow segments' &&
        attrs(s.attributes)['gen_ai.conversation.id'] === id,
    )
    .sort(
      (x, y) =>
        (attrs(x.attributes)['conversation.segment'] as number) -
        (attrs(y.attributes)['conversation.segment'] as number),
    );
const linksOf = (span: OtlpSpan | undefined) =>
  (span as unknown as { links?: { spanId: string }[] } | undefined)?.links?.map((l) => l.spanId);

/** A tracer provider to the receiver, a registry, a telemetry on both, and a memory store. */
function traced() {
  const provider = tracing();
  const registry = new Registry();
  const telemetry = createConversationTelemetry({ tracerProvider: provider, registry });
  return { provider, registry, telemetry, store: createMemoryStore() };
}

/** Flushes `provider` and reads the segments of conversation `id` the receiver holds. */
async function flushedSegments(provider: TracerProvider, id: string): Promise<OtlpSpan[]> {
  await provider.forceFlush();
  return segmentsOf(id);
}

/**
 * A traced, metered durable run of 6 dispatches from message 10 that `abort` aborts at message
 * 12: it is handed back, rejected `aborted`.
 */
async function abortedRun(
  conversationId: string,
  abort: (controller: AbortController) => void,
  delayMs?: number,
) {
  const { provider, registry, telemetry, store } = traced();
  const controller = new AbortController();
  const o = orchestrator(store, [telemetry], {
    steps: 6,
    ...(delayMs === undefined ? {} : { delayMs }),
    onStep: (n) => {
      if (n === 12) abort(controller);
    },
  });
  await expect(
    o.run({ sender: 'user', content: 10 }, { conversationId, signal: controller.signal }),
  ).rejects.toMatchObject({ reason: 'aborted' });
  return { provider, registry, o };
}

/**
 * Segment 1 of conversation `id` in a process sampling by `firstSampler`, slow (10 ms a
 * dispatch) and suspended; segment 2 resumed in a second process whose sampler drops by ratio and
 * keeps no ending. Returns the segments the receiver holds once both are flushed.
 */
async function acrossTwoProcesses(
  id: string,
  firstSampler: { ratio: number; maxDecisionDelayMs?: number },
  secondRegistry?: Registry,
): Promise<OtlpSpan[]> {
  const store = createMemoryStore();
  const first = tracing(firstSampler);
  const o1 = orchestrator(store, [createConversationTelemetry({ tracerProvider: first })], {
    delayMs: 10,
  });
  await o1.run({ sender: 'user', content: 0 }, { conversationId: id });
  await first.forceFlush();
  const second = tracing({
    ratio: 0,
    keepReasons: [],
    ...(secondRegistry ? { registry: secondRegistry } : {}),
  });
  const o2 = orchestrator(store, [createConversationTelemetry({ tracerProvider: second })]);
  await o2.resume(id, { input: { sender: 'person', content: 2 } });
  const segments = await flushedSegments(second, id);
  await Promise.all([first.shutdown(), second.shutdown()]);
  return segments;
}

/** Store metrics on a fresh registry over a memory store whose `stats()` is `stats`. */
function metricsOver(
  stats: () => Promise<readonly StoreStats[]>,
  options: { readonly timeoutMs?: number } = {},
) {
  const store = createMemoryStore();
  const registry = new Registry();
  const answering = { name: 'memory', list: store.list.bind(store), stats };
  const metrics = createStoreMetrics({
    store: answering as unknown as ConversationStore,
    registry,
    ...options,
    minIntervalMs: 1,
  });
  return { registry, metrics };
}

describe('one trace per conversation, in one process', () => {
  it('a suspension resumed later is one trace: both segments under the original parent, the second linked to the first', async () => {
    const { provider, registry, telemetry, store } = traced();
    const o = orchestrator(store, [telemetry]);
    const request = provider.getTracer('app').startSpan('request');
    const waiting = await context.with(trace.setSpan(context.active(), request), () =>
      o.run({ sender: 'user', content: 0 }, { conversationId: 'p1' }),
    );
    request.end();
    expect(waiting.suspended).toEqual({ responder: 'b', payload: { question: 'go on?' } });
    // Resumed from another context (a later HTTP request): still the conversation's trace.
    const later = provider.getTracer('app').startSpan('later request');
    await context.with(trace.setSpan(context.active(), later), () =>
      o.resume('p1', { input: { sender: 'person', content: 2 } }),
    );
    later.end();

    const [first, second] = await flushedSegments(provider, 'p1');
    const requestSpan = receiver.spans.find((s) => s.name === 'request');
    expect(first?.traceId).toBe(requestSpan?.traceId);
    expect(second?.traceId).toBe(requestSpan?.traceId);
    expect(first?.parentSpanId).toBe(requestSpan?.spanId);
    expect(second?.parentSpanId).toBe(requestSpan?.spanId);
    expect(linksOf(second)).toEqual([first?.spanId]);
    expect(attrs(first?.attributes)).toMatchObject({
      'conversation.segment': 1,
      'conversation.end.reason': 'suspended',
      'conversation.dispatch_count': 4,
      'conversation.dispatch_events.dropped': 0,
    });
    expect(attrs(second?.attributes)).toMatchObject({
      'conversation.segment': 2,
      'conversation.resume.cause': 'suspend',
      'conversation.end.reason': 'max_dispatches',
      'conversation.dispatch_count': 8,
      'conversation.dispatch_events.dropped': 0,
    });
    // One conversation: started once, ended once, its histograms observed once, at its end.
    const text = await registry.metrics();
    expect(text).toContain('orchestrator_conversations_started_total{orchestrator="segments"} 1');
    expect(text).toContain(
      'orchestrator_conversations_ended_total{orchestrator="segments",reason="max_dispatches"} 1',
    );
    expect(text).toContain(
      'orchestrator_conversation_dispatches_sum{orchestrator="segments",reason="max_dispatches"} 8',
    );
    expect(text).toContain(
      'orchestrator_conversation_dispatches_count{orchestrator="segments",reason="max_dispatches"} 1',
    );
    expect(text).toContain('orchestrator_conversations_in_progress{orchestrator="segments"} 0');
    expect(text).toContain(
      'orchestrator_conversations_resumed_total{orchestrator="segments",cause="suspend"} 1',
    );
    expect(text).toContain(
      'orchestrator_dispatches_total{orchestrator="segments",responder="a"} 4',
    );
    expect(text).toContain(
      'orchestrator_dispatches_total{orchestrator="segments",responder="b"} 4',
    );
    // Every commit timed: the creation is the store's, then 4 + suspension, resume + 4 + end.
    expect(text).toMatch(
      /orchestrator_checkpoint_duration_seconds_count\{orchestrator="segments",store="memory"\} \d+/,
    );
    await provider.shutdown();
  });

  it('an aborted durable run resumed is a handoff: the first segment ends aborted, the second says cause handoff', async () => {
    // Aborted while a responder's call (a promise) is open: a clean handoff.
    const { provider, registry, o } = await abortedRun(
      'h1',
      (controller) => setTimeout(() => controller.abort(), 0),
      5,
    );
    const done = await o.resume('h1');
    expect(done.dispatchCount).toBe(6);
    const [first, second] = await flushedSegments(provider, 'h1');
    expect(second?.traceId).toBe(first?.traceId);
    expect(linksOf(second)).toEqual([first?.spanId]);
    expect(attrs(first?.attributes)).toMatchObject({
      'conversation.segment': 1,
      'conversation.end.reason': 'aborted',
      'conversation.abort.reason': 'AbortError',
    });
    expect(attrs(second?.attributes)).toMatchObject({
      'conversation.segment': 2,
      'conversation.resume.cause': 'handoff',
      'conversation.end.reason': 'max_dispatches',
      'conversation.dispatch_count': 6,
    });
    // The segment with no parent is the trace's root: the next one nests under it.
    expect(first?.parentSpanId ?? '').toBe('');
    expect(second?.parentSpanId).toBe(first?.spanId);
    // The handoff is not an ending: one conversation, ended once.
    const text = await registry.metrics();
    expect(text).toContain(
      'orchestrator_conversations_ended_total{orchestrator="segments",reason="aborted"} 0',
    );
    expect(text).toContain(
      'orchestrator_conversations_ended_total{orchestrator="segments",reason="max_dispatches"} 1',
    );
    expect(text).toContain(
      'orchestrator_conversations_resumed_total{orchestrator="segments",cause="handoff"} 1',
    );
    await provider.shutdown();
  });
});

describe('cancel()', () => {
  it('ends an aborted durable run as aborted in a segment of its trace (cause cancel), counted once', async () => {
    const { provider, registry, o } = await abortedRun('c1', (controller) => controller.abort());
    expect(await o.cancel('c1', { reason: 'the trader left' })).toBe(true);
    const [first, second] = await flushedSegments(provider, 'c1');
    expect(second?.traceId).toBe(first?.traceId);
    expect(attrs(second?.attributes)).toMatchObject({
      'conversation.segment': 2,
      'conversation.resume.cause': 'cancel',
      'conversation.end.reason': 'aborted',
    });
    const text = await registry.metrics();
    // The abort handed it back (not an ending); cancel() ended it: one aborted ending.
    expect(text).toContain(
      'orchestrator_conversations_ended_total{orchestrator="segments",reason="aborted"} 1',
    );
    // A cancel is not a resume: counted as the ending above, not under resumed_total.
    expect(text).not.toContain('cause="cancel"');
    expect(text).toMatch(/^orchestrator_conversations_in_progress\{orchestrator="segments"\} 0$/m);
    await provider.shutdown();
  });
});

describe('the sampler across segments', () => {
  it('decides a suspended segment without the reason rule, and the final segment by all rules', async () => {
    const store = createMemoryStore();
    const dropping = tracing({ ratio: 0 });
    const o = orchestrator(store, [createConversationTelemetry({ tracerProvider: dropping })]);
    await o.run({ sender: 'user', content: 0 }, { conversationId: 'k0' });
    await o.resume('k0', { input: { sender: 'person', content: 2 } });
    // `suspended` is no ending to keep: segment 1 fell to the ratio (0); segment 2 ended
    // `max_dispatches`, which the default keepReasons keep.
    const segments = await flushedSegments(dropping, 'k0');
    expect(segments.map((x) => attrs(x.attributes)['conversation.segment'])).toEqual([2]);
    expect(attrs(segments[0]?.attributes)['conversation.sampler.rule']).toBe('reason');
    await dropping.shutdown();
  });

  it('keeps every later segment of a conversation whose earlier segment was kept, in a process whose sampler would drop it', async () => {
    // Process 1: segment 1 runs past maxDecisionDelayMs, so it is kept early (max_age), and its
    // suspension checkpoint says so. Process 2: a sampler that drops by ratio, ends with a
    // reason it does not keep.
    const registry = new Registry();
    const segments = await acrossTwoProcesses('k1', { ratio: 0, maxDecisionDelayMs: 1 }, registry);
    expect(segments.map((x) => attrs(x.attributes)['conversation.sampler.rule'])).toEqual([
      'max_age',
      'segment',
    ]);
    expect(segments[1]?.traceId).toBe(segments[0]?.traceId);
    // Counted as docs/sampling.md says: decision keep, rule segment (it was not counted at all).
    expect(await registry.metrics()).toMatch(
      /^orchestrator_sampler_decisions_total\{decision="keep",rule="segment"\} 1$/m,
    );
  });

  it('without the carried keep, the same later segment is dropped (the control)', async () => {
    expect(await acrossTwoProcesses('k2', { ratio: 0 })).toEqual([]);
  });
});

describe('the store gauges', () => {
  it('reads suspended conversations, the oldest age and the recovery backlog from the store at scrape time', async () => {
    const store = createMemoryStore();
    const registry = new Registry();
    // The scrape's clock, 7 s past the suspensions (stamped with Date.now() when committed).
    createStoreMetrics({ store, registry, now: () => Date.now() + 7_000, minIntervalMs: 1 });
    await orchestrator(store, []).run({ sender: 'user', content: 0 }, { conversationId: 'g1' });
    await orchestrator(store, []).run({ sender: 'user', content: 0 }, { conversationId: 'g2' });
    // A run aborted before it ended: released, running, held by nobody (the backlog).
    const controller = new AbortController();
    const aborted = orchestrator(store, [], { onStep: () => controller.abort() });
    await aborted
      .run({ sender: 'user', content: 0 }, { conversationId: 'g3', signal: controller.signal })
      .catch(() => {});
    const values = await registry.getMetricsAsJSON();
    const value = (name: string) => values.find((m) => m.name === name)?.values[0]?.value;
    expect(value('orchestrator_oldest_suspended_seconds')).toBeGreaterThanOrEqual(7);
    expect(value('orchestrator_oldest_suspended_seconds')).toBeLessThan(8);
    for (const [name, expected] of [
      ['orchestrator_conversations_suspended', 2],
      ['orchestrator_conversations_unleased', 1],
      ['orchestrator_store_read_failures_total', 0],
      ['orchestrator_store_up', 1],
    ] as const) {
      expect(value(name), name).toBe(expected);
    }
  });

  it('never hangs a scrape: a store that does not answer is counted as a failed read', async () => {
    const { registry } = metricsOver(() => new Promise<never>(() => {}), { timeoutMs: 20 });
    const text = await registry.metrics();
    expect(text).toContain(
      'orchestrator_store_read_failures_total{store="memory",reason="timeout"} 1',
    );
    expect(text).toContain(
      'orchestrator_store_read_failures_total{store="memory",reason="error"} 0',
    );
    expect(text).toContain('orchestrator_store_up{store="memory"} 0');
    expect(text).not.toMatch(/orchestrator_conversations_suspended\{/);
  });

  it('sends no read behind an unanswered one: later scrapes wait for it, each at most timeoutMs', async () => {
    let calls = 0;
    let answer: (stats: readonly StoreStats[]) => void = () => {};
    const { registry, metrics } = metricsOver(
      () => {
        calls++;
        return new Promise<readonly StoreStats[]>((resolve) => {
          answer = resolve;
        });
      },
      { timeoutMs: 20 },
    );
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      expect(await registry.metrics()).toContain('orchestrator_store_up{store="memory"} 0');
      expect(performance.now() - started).toBeLessThan(200);
    }
    expect(calls).toBe(1);
    expect(metrics.lastFailure?.reason).toBe('timeout');
    // Once it answers, the next scrape reads again (a fresh read, not the late answer).
    answer([{ orchestrator: 'o', running: 0, suspended: 9 }]);
    await new Promise((r) => setTimeout(r, 5));
    const next = registry.metrics();
    // Answered as soon as the fresh read is sent (a fixed wait lost that race on a loaded machine).
    while (calls < 2) await new Promise((r) => setImmediate(r));
    answer([{ orchestrator: 'o', running: 0, suspended: 3 }]);
    const text = await next;
    expect(calls).toBe(2);
    expect(text).toContain('orchestrator_conversations_suspended{orchestrator="o"} 3');
    expect(text).toContain('orchestrator_store_up{store="memory"} 1');
    expect(metrics.failures).toBe(5);
  });

  it("says why a read failed: reason error and the store's error", async () => {
    const { registry, metrics } = metricsOver(() => Promise.reject(new Error('disk on fire')));
    const text = await registry.metrics();
    expect(text).toContain(
      'orchestrator_store_read_failures_total{store="memory",reason="error"} 1',
    );
    expect(text).toContain('orchestrator_store_up{store="memory"} 0');
    expect(String(metrics.lastFailure?.error)).toContain('disk on fire');
  });
});
