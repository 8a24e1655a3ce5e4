/**
 * Issue 18: one clock for every span and event the plugin writes (children within parents,
 * events within spans, exactly, on every ending), and endings that say what happened (the
 * responder's own error, a caller's abort as Unset with its reason, deadlines per responder).
 */
import { type HrTime, SpanStatusCode } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CheckpointError,
  ConversationExistsError,
  ConversationOrchestrator,
  createMemoryStore,
  type Message,
  maxDispatches,
  roundRobin,
} from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import { expectLines } from '../helpers/exposition.ts';
import { memoryTracing, restoreTracing, spansNamed } from '../helpers/tracing.ts';
import { wrap } from '../helpers/wrapped-store.ts';

afterEach(restoreTracing);

const ns = (t: HrTime) => BigInt(t[0]) * 1_000_000_000n + BigInt(t[1]);

/** Every way `child` could be drawn outside `parent`, and every event outside its span. */
function clockFaults(spans: readonly ReadableSpan[]): string[] {
  const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
  const faults: string[] = [];
  for (const span of spans) {
    for (const event of span.events) {
      const t = ns(event.time);
      if (t < ns(span.startTime) || t > ns(span.endTime)) {
        faults.push(`${span.name}: event ${event.name} outside its span`);
      }
    }
    const parent = byId.get(span.parentSpanContext?.spanId ?? '');
    if (parent === undefined) continue;
    if (ns(span.startTime) < ns(parent.startTime))
      faults.push(`${span.name} starts before its parent`);
    if (ns(span.endTime) > ns(parent.endTime)) faults.push(`${span.name} ends after its parent`);
  }
  return faults;
}

type Behaviour = 'answer' | 'fail' | 'hang';

/** Two responders; `behaviour(n)` says what the n-th invocation does. */
function orchestrator(
  telemetry: ReturnType<typeof createConversationTelemetry<number, number>>,
  behaviour: (n: number) => Behaviour,
  extra: Partial<ConstructorParameters<typeof ConversationOrchestrator<number, number>>[0]> = {},
) {
  let n = 0;
  return new ConversationOrchestrator<number, number>({
    name: 'clock',
    responders: ['a', 'b'].map((name) => ({
      name,
      respond: async (m: Message<number>) => {
        const what = behaviour(++n);
        if (what === 'fail') throw new RangeError(`${name} failed`);
        if (what === 'hang') await new Promise((r) => setTimeout(r, 50));
        else await Promise.resolve();
        return { sender: name, content: m.content + 1 };
      },
    })),
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (s, m) => s + m.content },
    termination: maxDispatches(6),
    observers: [telemetry],
    ...extra,
  });
}

describe('one clock', () => {
  it.each([
    ['terminated', () => 'answer' as const, {}],
    ['failed', (n: number) => (n === 4 ? ('fail' as const) : ('answer' as const)), {}],
    [
      'past a dispatch deadline',
      (n: number) => (n === 3 ? ('hang' as const) : ('answer' as const)),
      { dispatchTimeoutMs: 5 },
    ],
  ])(
    'keeps children within parents and events within spans, exactly, when %s (200 conversations)',
    async (_, behaviour, extra) => {
      const { exporter, tracer } = memoryTracing();
      const telemetry = createConversationTelemetry<number, number>({
        tracer,
        responderSpans: true,
      });
      await Promise.all(
        Array.from({ length: 200 }, () =>
          orchestrator(telemetry, behaviour, extra)
            .run({ sender: 'user', content: 0 })
            .catch(() => {}),
        ),
      );
      const spans = exporter.getFinishedSpans();
      expect(spansNamed(exporter, 'invoke_workflow clock')).toHaveLength(200);
      expect(clockFaults(spans)).toEqual([]);
    },
  );

  it('keeps a child cut short by a caller’s abort within its parent', async () => {
    const { exporter, tracer } = memoryTracing();
    const telemetry = createConversationTelemetry<number, number>({ tracer, responderSpans: true });
    await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        orchestrator(telemetry, (n) => (n === 3 ? 'hang' : 'answer'))
          .run({ sender: 'user', content: 0 }, { signal: AbortSignal.timeout(5 + (i % 5)) })
          .catch(() => {}),
      ),
    );
    expect(spansNamed(exporter, 'invoke_workflow clock')).toHaveLength(50);
    expect(clockFaults(exporter.getFinishedSpans())).toEqual([]);
  });
});

describe('a caller’s abort is not an error', () => {
  it('leaves the conversation and the cut-short responder span Unset, marked aborted, with the abort reason’s class', async () => {
    const { exporter, tracer } = memoryTracing();
    const telemetry = createConversationTelemetry<number, number>({ tracer, responderSpans: true });
    await expect(
      orchestrator(telemetry, (n) => (n === 2 ? 'hang' : 'answer')).run(
        { sender: 'user', content: 0 },
        { signal: AbortSignal.timeout(10) },
      ),
    ).rejects.toThrow('aborted');
    const [conversation] = spansNamed(exporter, 'invoke_workflow clock');
    expect(conversation?.status).toEqual({ code: SpanStatusCode.UNSET });
    expect(conversation?.attributes['conversation.end.reason']).toBe('aborted');
    expect(conversation?.attributes['conversation.abort.reason']).toBe('TimeoutError');
    expect(conversation?.attributes['error.type']).toBeUndefined();
    expect(conversation?.events.filter((e) => e.name === 'exception')).toEqual([]);
    const [cut] = spansNamed(exporter, 'invoke_agent b');
    expect(cut?.status).toEqual({ code: SpanStatusCode.UNSET });
    expect(cut?.attributes['conversation.end.reason']).toBe('aborted');
    expect(cut?.attributes['conversation.abort.reason']).toBe('TimeoutError');
    expect(cut?.attributes['error.type']).toBeUndefined();
    expect(cut?.events).toEqual([]);
  });

  it('names a custom abort reason’s class, and _OTHER for one that is not an Error', async () => {
    for (const [reason, shown] of [
      [new RangeError('user left'), 'RangeError'],
      ['bye', '_OTHER'],
    ] as const) {
      const { exporter, tracer } = memoryTracing();
      const controller = new AbortController();
      const telemetry = createConversationTelemetry<number, number>({ tracer });
      setTimeout(() => controller.abort(reason), 5);
      await expect(
        orchestrator(telemetry, (n) => (n === 2 ? 'hang' : 'answer')).run(
          { sender: 'user', content: 0 },
          { signal: controller.signal },
        ),
      ).rejects.toThrow('aborted');
      const [conversation] = spansNamed(exporter, 'invoke_workflow clock');
      expect(conversation?.attributes['conversation.abort.reason']).toBe(shown);
      restoreTracing();
    }
  });

  it('keeps a dispatch deadline an error on the conversation and the cut-short responder span', async () => {
    const { exporter, tracer } = memoryTracing();
    const telemetry = createConversationTelemetry<number, number>({ tracer, responderSpans: true });
    await expect(
      orchestrator(telemetry, (n) => (n === 2 ? 'hang' : 'answer'), {
        dispatchTimeoutMs: 5,
      }).run({ sender: 'user', content: 0 }),
    ).rejects.toThrow('dispatch deadline');
    const [conversation] = spansNamed(exporter, 'invoke_workflow clock');
    expect(conversation?.status.code).toBe(SpanStatusCode.ERROR);
    expect(conversation?.attributes['error.type']).toBe('DispatchDeadlineError');
    const [cut] = spansNamed(exporter, 'invoke_agent b');
    expect(cut?.status.code).toBe(SpanStatusCode.ERROR);
    expect(cut?.attributes['error.type']).toBe('deadline');
    expect(cut?.attributes['conversation.end.reason']).toBe('deadline');
    const exception = cut?.events.find((e) => e.name === 'exception');
    expect(exception?.attributes?.['exception.type']).toBe('DispatchDeadlineError');
  });
});

describe('the responder’s own error on the conversation span', () => {
  it('records its class, message and throw site without responder spans', async () => {
    const { exporter, tracer } = memoryTracing();
    const telemetry = createConversationTelemetry<number, number>({ tracer });
    await expect(
      orchestrator(telemetry, (n) => (n === 3 ? 'fail' : 'answer')).run({
        sender: 'user',
        content: 0,
      }),
    ).rejects.toThrow('Responder `a` failed: a failed');
    const [conversation] = spansNamed(exporter, 'invoke_workflow clock');
    expect(conversation?.attributes['error.type']).toBe('RangeError');
    expect(conversation?.status).toEqual({
      code: SpanStatusCode.ERROR,
      message: 'Responder `a` failed: a failed',
    });
    const exception = conversation?.events.find((e) => e.name === 'exception');
    expect(exception?.attributes?.['exception.type']).toBe('RangeError');
    expect(exception?.attributes?.['exception.message']).toBe('a failed');
    expect(String(exception?.attributes?.['exception.stacktrace'])).toMatch(
      /^RangeError: a failed\n\s+at [^\n]*observability\/endings\.test\.ts/,
    );
  });
});

describe('deadlines per responder in the metrics', () => {
  it('counts orchestrator_responder_deadlines_total for the responder that did not answer', async () => {
    const registry = new Registry();
    const telemetry = createConversationTelemetry<number, number>({ registry });
    const runs = [2, 2, 3].map((hangAt) =>
      orchestrator(telemetry, (n) => (n === hangAt ? 'hang' : 'answer'), {
        dispatchTimeoutMs: 5,
      })
        .run({ sender: 'user', content: 0 })
        .catch(() => {}),
    );
    await Promise.all(runs);
    expectLines(await registry.metrics(), [
      'orchestrator_responder_deadlines_total{orchestrator="clock",responder="b"} 2',
      'orchestrator_responder_deadlines_total{orchestrator="clock",responder="a"} 1',
      'orchestrator_conversations_ended_total{orchestrator="clock",reason="deadline"} 3',
    ]);
  });

  it('creates no deadline series for a responder that never hit the deadline', async () => {
    const registry = new Registry();
    const telemetry = createConversationTelemetry<number, number>({ registry });
    await orchestrator(telemetry, () => 'answer', { termination: maxDispatches(2) }).run({
      sender: 'user',
      content: 0,
    });
    expect(await registry.metrics()).not.toContain('orchestrator_responder_deadlines_total{');
  });
});

describe('a durable conversation that cannot be created', () => {
  // Its observers start before the creation (issue 43, finding 2: the trace context goes into
  // the first checkpoint), so a creation that fails is a conversation that failed at its start.
  it('ends its span failed and counts it ended with reason error, for a taken id and for a store that throws', async () => {
    const { exporter, provider } = memoryTracing();
    const registry = new Registry();
    const telemetry = createConversationTelemetry<number, number>({
      tracerProvider: provider,
      registry,
    });
    const store = createMemoryStore();
    // The process has been up a while: a failed creation's elapsed time is its own, not that.
    while (performance.now() < 1500) await new Promise((r) => setTimeout(r, 50));
    const o = orchestrator(telemetry, () => 'answer', { store, name: 'created' });
    await o.run({ sender: 'user', content: 0 }, { conversationId: 'taken' });
    await expect(
      o.run({ sender: 'user', content: 0 }, { conversationId: 'taken' }),
    ).rejects.toBeInstanceOf(ConversationExistsError);
    const failing = wrap(store, { create: () => Promise.reject(new Error('disk full')) });
    const broken = orchestrator(telemetry, () => 'answer', { store: failing, name: 'created' });
    const error = await broken
      .run({ sender: 'user', content: 0 }, { conversationId: 'never' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CheckpointError);
    expect(String((error as Error).message)).toContain('disk full');
    await provider.forceFlush();
    const spans = spansNamed(exporter, 'invoke_workflow created');
    expect(spans.map((s) => s.attributes['gen_ai.conversation.id'])).toEqual([
      'taken',
      'taken',
      'never',
    ]);
    for (const span of spans.slice(1)) {
      expect(span.status.code).toBe(SpanStatusCode.ERROR);
      expect(span.attributes['conversation.elapsed_ms']).toBeLessThan(1000);
    }
    // A taken id is no ConversationError: the failure the observers hear is caused by it.
    expect(spans[1]?.status.message).toContain('already exists in the store');
    expect(spans[2]?.attributes['error.type']).toBe('CheckpointError');
    const text = await registry.metrics();
    expect(text).toContain('orchestrator_conversations_started_total{orchestrator="created"} 3');
    expect(text).toMatch(
      /orchestrator_conversations_ended_total\{orchestrator="created",reason="error"\} 2/,
    );
    expect(text).toContain('orchestrator_conversations_in_progress{orchestrator="created"} 0');
  });
});
