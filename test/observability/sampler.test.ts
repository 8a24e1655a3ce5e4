import { context, type Span, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type ConversationOrchestrator,
  type Message,
  maxDispatches,
  type Responder,
  stopWhen,
  type TerminationPolicy,
} from '../../src/index.ts';
import {
  ConversationSampler,
  type ConversationSamplerOptions,
  createConversationSampler,
  createConversationTelemetry,
} from '../../src/observability/index.ts';
import { numberConversation } from '../helpers/number-conversation.ts';
import { restoreTracing, warningsLogger } from '../helpers/tracing.ts';

afterEach(restoreTracing);

/** A tracer provider whose only processor is the sampler, exporting to memory through `next`. */
function sampledTracing(options: Partial<ConversationSamplerOptions> = {}) {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const exporter = new InMemorySpanExporter();
  const sampler = createConversationSampler({
    next: new SimpleSpanProcessor({ exporter: exporter }),
    ...options,
  });
  const provider = new TracerProvider({ spanProcessors: [sampler] });
  trace.setGlobalTracerProvider(provider);
  return { exporter, sampler, provider, app: provider.getTracer('app') };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** An app span `llm.call`, started and ended as an instrumented LLM call would. */
const llmCall = () => trace.getTracer('app').startSpan('llm.call').end();

/** Responder `a`: an `llm.call`, then it waits for `wait(m)` and answers the number plus one. */
const afterLlmCall = (wait: (m: Message<number>) => unknown): Responder<number, number> => ({
  name: 'a',
  respond: async (m) => {
    llmCall();
    await wait(m);
    return { sender: 'a', content: m.content + 1 };
  },
});

/** Is the trace in the share `ratio` by the rule of consistent probability sampling (BigInt). */
function inShare(traceId: string, ratio: number): boolean {
  return BigInt(`0x${traceId.slice(18)}`) >= BigInt(Math.round((1 - ratio) * 2 ** 56));
}

type Kind = 'converged' | 'queue_exhausted' | 'error' | 'max_dispatches' | 'slow' | 'long';

/**
 * One orchestrator per kind of ending. Every responder starts an app span (as an instrumented
 * LLM call would) in its context, so a complete trace is request > invoke_workflow >
 * invoke_agent > llm.call.
 */
function orchestrators(
  observers: ConstructorParameters<typeof ConversationOrchestrator>[0]['observers'],
) {
  const answer =
    (name: string, behaviour: 'answer' | 'silent' | 'throw' | 'sleep') => (m: Message<number>) => {
      llmCall();
      if (behaviour === 'throw') throw new Error('model down');
      if (behaviour === 'silent') return [];
      const reply = { sender: name, content: m.content + 1 };
      return behaviour === 'sleep' ? sleep(25).then(() => reply) : reply;
    };
  const make = (
    kind: Kind,
    behaviour: 'answer' | 'silent' | 'throw' | 'sleep',
    termination: TerminationPolicy<number, number>,
  ) =>
    numberConversation(kind, {
      responders: ['a', 'b'].map(
        (name): Responder<number, number> => ({ name, respond: answer(name, behaviour) }),
      ),
      termination,
      ...(observers ? { observers } : {}),
    });
  const convergedAt = (n: number) => stopWhen<number, number>((s) => s.projection > n, 'converged');
  return {
    converged: make('converged', 'answer', convergedAt(3)),
    queue_exhausted: make('queue_exhausted', 'silent', maxDispatches(5)),
    error: make('error', 'throw', maxDispatches(5)),
    max_dispatches: make('max_dispatches', 'answer', maxDispatches(2)),
    slow: make('slow', 'sleep', convergedAt(1)),
    long: make('long', 'answer', convergedAt(12)),
  } satisfies Record<Kind, ConversationOrchestrator<number, number>>;
}

function kindOf(i: number): Kind {
  if (i % 50 === 3) return 'slow';
  if (i % 50 === 4) return 'long';
  return (['error', 'max_dispatches', 'queue_exhausted'] as const)[i % 10] ?? 'converged';
}

/**
 * Runs the conversation inside a server span `request` that ends after it (a late span); answers
 * its trace id and elapsed time.
 */
async function inRequest(
  app: ReturnType<typeof trace.getTracer>,
  run: () => Promise<{ elapsedMs: number }>,
): Promise<{ traceId: string; elapsedMs: number }> {
  return app.startActiveSpan('request', async (span: Span) => {
    const { elapsedMs } = await run().catch((error: { elapsedMs: number }) => error);
    span.end();
    return { traceId: span.spanContext().traceId, elapsedMs };
  });
}

const byTrace = (spans: readonly ReadableSpan[]) => {
  const map = new Map<string, ReadableSpan[]>();
  for (const s of spans) {
    const id = s.spanContext().traceId;
    map.set(id, [...(map.get(id) ?? []), s]);
  }
  return map;
};

describe('createConversationSampler: which traces are exported', () => {
  it('exports exactly every failed, unconverged, slow and long conversation and the ratio of the rest, as complete trees', async () => {
    const ratio = 0.25;
    const registry = new Registry();
    const { exporter, sampler, app } = sampledTracing({
      ratio,
      slowMs: 20,
      longDispatches: 10,
      registry,
    });
    const telemetry = createConversationTelemetry({ responderSpans: true, registry });
    const o = orchestrators([telemetry]);
    const kinds = new Map<string, Kind>();
    // Under load a quick conversation can be slow too: the expectation reads its elapsed time.
    const elapsed = new Map<string, number>();
    // 1,000 conversations, 50 at a time.
    for (let batch = 0; batch < 20; batch++) {
      await Promise.all(
        Array.from({ length: 50 }, async (_, j) => {
          const kind = kindOf(batch * 50 + j);
          const { traceId, elapsedMs } = await inRequest(app, () =>
            o[kind].run({ sender: 'user', content: 0 }),
          );
          kinds.set(traceId, kind);
          elapsed.set(traceId, elapsedMs);
        }),
      );
    }
    expect(kinds.size).toBe(1000);

    const slow = (id: string) => (elapsed.get(id) as number) > 20;
    const rest = [...kinds].filter(
      ([id, kind]) => (kind === 'converged' || kind === 'queue_exhausted') && !slow(id),
    );
    const unremarkable = new Set(rest.map(([id]) => id));
    const expected = new Set(
      [...kinds].filter(([id]) => !unremarkable.has(id) || inShare(id, ratio)).map(([id]) => id),
    );
    const traces = byTrace(exporter.getFinishedSpans());
    expect(new Set(traces.keys())).toEqual(expected);

    // Every failed, unconverged, slow and long one: 100 + 100 + 20 + 20.
    const always = [...kinds.values()].filter((k) => k !== 'converged' && k !== 'queue_exhausted');
    expect(always).toHaveLength(240);
    // The rest: 760 conversations (less any that load made slow), within 4.5 standard deviations
    // of a quarter (190 +- 54).
    expect(rest.length).toBeGreaterThan(700);
    const share = rest.filter(([id]) => inShare(id, ratio)).length;
    expect(Math.abs(share - rest.length * ratio)).toBeLessThan(
      4.5 * Math.sqrt(rest.length * ratio * (1 - ratio)),
    );

    // Complete trees: the request, its conversation, one responder span and one llm.call per
    // invocation, each span's parent in the trace.
    for (const [id, spans] of traces) {
      const names = spans.map((s) => s.name);
      const conversation = spans.find((s) => s.name.startsWith('invoke_workflow '));
      const invocations = names.filter((n) => n.startsWith('invoke_agent ')).length;
      expect(names.filter((n) => n === 'request')).toHaveLength(1);
      expect(conversation?.name).toBe(`invoke_workflow ${kinds.get(id)}`);
      expect(names.filter((n) => n === 'llm.call')).toHaveLength(invocations);
      const dispatches = conversation?.attributes['conversation.dispatch_count'] as number;
      const kind = kinds.get(id);
      // A failed conversation also has the invocation that threw.
      expect(invocations).toBe(kind === 'error' ? 1 : dispatches);
      const spanIds = new Set(spans.map((s) => s.spanContext().spanId));
      for (const s of spans) {
        if (s.name !== 'request') expect(spanIds.has(s.parentSpanContext?.spanId ?? '')).toBe(true);
      }
      const rule = conversation?.attributes['conversation.sampler.rule'];
      expect(rule).toBe(
        kind === 'error'
          ? 'failed'
          : kind === 'max_dispatches'
            ? 'reason'
            : slow(id)
              ? 'slow'
              : kind === 'long'
                ? 'long'
                : 'ratio',
      );
    }
    expect(sampler.pendingTraces).toBe(0);
    expect(sampler.bufferedSpans).toBe(0);

    const decisions = await registry.getSingleMetricAsString(
      'orchestrator_sampler_decisions_total',
    );
    const count = (labels: string) =>
      Number(new RegExp(`${labels}\\} (\\d+)`).exec(decisions)?.[1] ?? Number.NaN);
    expect(count('decision="keep",rule="failed"')).toBe(100);
    expect(count('decision="keep",rule="reason"')).toBe(100);
    const slowOnes = [...kinds].filter(
      ([id, kind]) => kind !== 'error' && kind !== 'max_dispatches' && slow(id),
    ).length;
    expect(slowOnes).toBeGreaterThanOrEqual(20);
    expect(count('decision="keep",rule="slow"')).toBe(slowOnes);
    expect(count('decision="keep",rule="long"')).toBe(20 + 20 + 760 - rest.length - slowOnes);
    expect(count('decision="keep",rule="ratio"')).toBe(share);
    expect(count('decision="drop",rule="ratio"')).toBe(rest.length - share);
  });

  it('keeps every conversation at ratio 1 and none of the rest at ratio 0', async () => {
    for (const ratio of [0, 1]) {
      const { exporter, app } = sampledTracing({ ratio });
      const o = orchestrators([createConversationTelemetry()]);
      const ids = await Promise.all(
        Array.from({ length: 40 }, () =>
          inRequest(app, () => o.converged.run({ sender: 'user', content: 0 })),
        ),
      );
      expect(new Set(byTrace(exporter.getFinishedSpans()).keys())).toEqual(
        new Set(ratio === 1 ? ids.map((r) => r.traceId) : []),
      );
      restoreTracing();
    }
  });

  it('follows the decision with spans of the trace that end after the conversation', async () => {
    // Ratio 0: a converged conversation is dropped, a failed one kept.
    const { exporter, app } = sampledTracing({ ratio: 0 });
    const o = orchestrators([createConversationTelemetry()]);
    const late = async (kind: Kind) =>
      app.startActiveSpan('request', async (request: Span) => {
        let child: Span | undefined;
        const orchestrator = numberConversation(kind, {
          responders: [
            {
              name: 'a',
              respond: (m) => {
                // A child that outlives the conversation (a fire-and-forget call).
                child = trace.getTracer('app').startSpan('background');
                if (kind === 'error') throw new Error('down');
                return { sender: 'a', content: m.content + 1 };
              },
            },
          ],
          termination: stopWhen((s) => s.projection > 0, 'converged'),
          observers: [createConversationTelemetry()],
        });
        await orchestrator.run({ sender: 'user', content: 0 }).catch(() => {});
        const before = exporter.getFinishedSpans().map((s) => s.name);
        await sleep(5);
        child?.end();
        request.end();
        return { traceId: request.spanContext().traceId, before };
      });
    expect(o).toBeDefined();
    const dropped = await late('converged');
    const kept = await late('error');
    expect(dropped.before).toEqual([]);
    // The failed conversation was exported at its end, the late spans after it.
    expect(kept.before).toEqual(['invoke_workflow error']);
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => [s.name, s.spanContext().traceId])).toEqual([
      ['invoke_workflow error', kept.traceId],
      ['background', kept.traceId],
      ['request', kept.traceId],
    ]);
  });

  it('passes spans of traces without a conversation straight through', async () => {
    const { exporter, app, sampler } = sampledTracing({ ratio: 0 });
    app.startActiveSpan('request', (s: Span) => {
      app.startSpan('db.query').end();
      s.end();
    });
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(['db.query', 'request']);
    expect(sampler.bufferedSpans).toBe(0);
  });
});

describe('createConversationSampler: bounds', () => {
  it('decides a conversation that never ends after maxDecisionDelayMs: kept, marked, its later spans following', async () => {
    const registry = new Registry();
    const { exporter, sampler } = sampledTracing({ ratio: 0, maxDecisionDelayMs: 100, registry });
    const controller = new AbortController();
    const orchestrator = numberConversation('stuck', {
      responders: [
        {
          name: 'a',
          respond: (m, _s, ctx) => {
            llmCall();
            // The second call never answers (until the abort).
            if (m.content > 0)
              return new Promise((_, reject) => ctx.signal.addEventListener('abort', reject));
            return { sender: 'a', content: m.content + 1 };
          },
        },
      ],
      termination: maxDispatches(100),
      observers: [createConversationTelemetry()],
    });
    const run = orchestrator.run({ sender: 'user', content: 0 }, { signal: controller.signal });
    run.catch(() => {});
    await sleep(20);
    expect(sampler.bufferedSpans).toBe(2);
    expect(exporter.getFinishedSpans()).toEqual([]);
    await sleep(1200);
    // Decided early: what was buffered went out, nothing waits.
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(['llm.call', 'llm.call']);
    expect(sampler.pendingTraces).toBe(0);
    expect(sampler.bufferedSpans).toBe(0);
    expect(
      await registry.getSingleMetricAsString('orchestrator_sampler_decisions_total'),
    ).toContain('orchestrator_sampler_decisions_total{decision="keep",rule="max_age"} 1');
    controller.abort();
    await run.catch(() => {});
    const conversation = exporter
      .getFinishedSpans()
      .find((s) => s.name === 'invoke_workflow stuck');
    expect(conversation?.attributes['conversation.sampler.rule']).toBe('max_age');
    expect(conversation?.attributes['conversation.end.reason']).toBe('aborted');
  });

  it('loses the spans of one flooding trace past maxSpansPerTrace, counted and said on its span, and nothing of the others', async () => {
    const registry = new Registry();
    const { exporter } = sampledTracing({ ratio: 0, maxSpansPerTrace: 50, registry });
    const flood = numberConversation('flood', {
      responders: [
        {
          name: 'a',
          respond: () => {
            for (let i = 0; i < 200; i++) trace.getTracer('app').startSpan('llm.call').end();
            throw new Error('down');
          },
        },
      ],
      termination: maxDispatches(1),
      observers: [createConversationTelemetry()],
    });
    const quiet = orchestrators([createConversationTelemetry()]).error;
    await Promise.all([
      flood.run({ sender: 'user', content: 0 }).catch(() => {}),
      quiet.run({ sender: 'user', content: 0 }).catch(() => {}),
    ]);
    const traces = [...byTrace(exporter.getFinishedSpans()).values()];
    const flooded = traces.find((t) => t.some((s) => s.name === 'invoke_workflow flood')) ?? [];
    const other = traces.find((t) => t.some((s) => s.name === 'invoke_workflow error')) ?? [];
    expect(flooded.filter((s) => s.name === 'llm.call')).toHaveLength(50);
    expect(
      flooded.find((s) => s.name === 'invoke_workflow flood')?.attributes[
        'conversation.sampler.spans_lost'
      ],
    ).toBe(150);
    expect(other.map((s) => s.name).sort()).toEqual(['invoke_workflow error', 'llm.call']);
    const lost = await registry.getSingleMetricAsString('orchestrator_sampler_spans_lost_total');
    expect(lost).toContain('orchestrator_sampler_spans_lost_total{limit="trace"} 150');
    expect(lost).toContain('orchestrator_sampler_spans_lost_total{limit="total"} 0');
  });

  /**
   * Parks 10,000 conversations, each with one ended child span, on a gate; answers the heap they
   * hold (after a full collection) and what is left once they have all ended. `sampler`: the
   * sampler's options, or undefined for the control without a sampler (same processor behind).
   */
  async function park(sampler: Partial<ConversationSamplerOptions> | undefined) {
    const gc = (globalThis as { gc?: () => void }).gc as () => void;
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    // A processor that counts and lets go (an exporter's own buffers are not the sampler's).
    let exported = 0;
    const next = {
      onStart: () => {},
      onEnd: () => {
        exported++;
      },
      forceFlush: async () => {},
      shutdown: async () => {},
    };
    const processor =
      sampler === undefined ? next : createConversationSampler({ next, ...sampler });
    trace.setGlobalTracerProvider(new TracerProvider({ spanProcessors: [processor] }));
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started = 0;
    const orchestrator = numberConversation('parked', {
      responders: [
        afterLlmCall(async () => {
          started++;
          await gate;
        }),
      ],
      termination: stopWhen((s) => s.projection > 0, 'converged'),
      observers: [createConversationTelemetry()],
    });
    /** What the sampler holds (undefined for the control). */
    const holding = () =>
      !(processor instanceof ConversationSampler)
        ? undefined
        : { pending: processor.pendingTraces, buffered: processor.bufferedSpans };
    /** The heap grown since `before`, after a full collection. */
    const heapSince = (before: number) => {
      gc();
      return process.memoryUsage().heapUsed - before;
    };
    const before = heapSince(0);
    let runs: Promise<unknown>[] | undefined = Array.from({ length: 10_000 }, () =>
      orchestrator.run({ sender: 'user', content: 0 }),
    );
    for (let i = 0; i < 200 && started < 10_000; i++) await sleep(10);
    expect(started).toBe(10_000);
    const held = holding();
    const parked = heapSince(before);
    release();
    await Promise.all(runs);
    runs = undefined;
    const left = holding();
    const after = heapSince(before);
    restoreTracing();
    return { parked, after, held, left, exported };
  }

  it('holds 10,000 concurrent conversations within maxBufferedSpans, counting what it could not hold, and lets go of all of it', async () => {
    const registry = new Registry();
    const bounded = await park({ ratio: 0, maxBufferedSpans: 5000, registry });
    expect(bounded.held).toEqual({ pending: 10_000, buffered: 5000 });
    expect(bounded.left).toEqual({ pending: 0, buffered: 0 });
    // Ratio 0, all converged: nothing exported.
    expect(bounded.exported).toBe(0);
    const lost = await registry.getSingleMetricAsString('orchestrator_sampler_spans_lost_total');
    expect(lost).toContain('orchestrator_sampler_spans_lost_total{limit="total"} 5000');
    // What a parked conversation costs with the sampler holding its span, against the same
    // conversation exported at once (docs/sampling.md states the figures).
    // Measured twice each, alternating, after the run above warmed everything up: the smaller.
    const controls = [await park(undefined)];
    const samples = [await park({ ratio: 0 })];
    controls.push(await park(undefined));
    samples.push(await park({ ratio: 0 }));
    for (const sampled of samples)
      expect(sampled.held).toEqual({ pending: 10_000, buffered: 10_000 });
    const least = (runs: { parked: number }[]) => Math.min(...runs.map((r) => r.parked));
    const leastAfter = (runs: { after: number }[]) => Math.min(...runs.map((r) => r.after));
    const perConversation = (least(samples) - least(controls)) / 10_000;
    console.log(
      `sampler memory per parked conversation: control ${controls.map((c) => (c.parked / 10_000).toFixed(0))} B, sampled ${samples.map((c) => (c.parked / 10_000).toFixed(0))} B, bounded at 5,000 spans ${(bounded.parked / 10_000).toFixed(0)} B; after: control ${controls.map((c) => c.after)}, sampled ${samples.map((c) => c.after)}`,
    );
    // The sampler's share: one buffered span and one pending entry, between 0.5 and 3 KiB (it
    // does hold the span: the measure sees it).
    expect(perConversation).toBeGreaterThan(512);
    expect(perConversation).toBeLessThan(3 * 1024);
    // Bounded holds less than unbounded: half the spans.
    expect(bounded.parked).toBeLessThan(least(samples));
    // Everything let go but the 10,000 remembered decisions (~100 B each).
    expect(leastAfter(samples) - leastAfter(controls)).toBeLessThan(3 * 1024 * 1024);
  });

  it('remembers at most maxDecisions decisions: a late span of a forgotten trace passes through', async () => {
    const { exporter, app } = sampledTracing({ ratio: 0, maxDecisions: 2 });
    const o = orchestrators([createConversationTelemetry()]);
    const requests: Span[] = [];
    for (let i = 0; i < 3; i++) {
      await app.startActiveSpan('request', async (span: Span) => {
        requests.push(span);
        await o.converged.run({ sender: 'user', content: 0 });
      });
    }
    for (const r of requests) r.end();
    // The first trace's drop was forgotten: its late request span went through.
    expect(exporter.getFinishedSpans().map((s) => s.spanContext().traceId)).toEqual([
      requests[0]?.spanContext().traceId,
    ]);
  });
});

describe('createConversationSampler: a trace kept early stays decided until its conversation ends', () => {
  /**
   * Conversations that each start an app span, then wait at their gate (the second dispatch
   * never answers until `release(i)`); answers their gates and runs. The first dispatch answers,
   * so `llm.call` spans end (and are exported) under the early keep.
   */
  function gated(count: number) {
    const gates: (() => void)[] = [];
    const conversations: { traceId: string; span: WeakRef<object> }[] = [];
    const orchestrator = numberConversation('long', {
      responders: [
        afterLlmCall(async (m) => {
          if (m.content === 0) {
            const active = trace.getActiveSpan();
            conversations.push({
              traceId: active?.spanContext().traceId ?? '',
              span: new WeakRef(active ?? {}),
            });
            await new Promise<void>((resolve) => gates.push(resolve));
          }
        }),
      ],
      // Ends well: only max_age can keep it at ratio 0.
      termination: stopWhen((s) => s.projection > 1, 'converged'),
      observers: [createConversationTelemetry()],
    });
    const runs = Array.from({ length: count }, () =>
      orchestrator.run({ sender: 'user', content: 0 }),
    );
    return { gates, conversations, runs };
  }

  const decisions = async (registry: Registry) =>
    (await registry.getSingleMetricAsString('orchestrator_sampler_decisions_total'))
      .split('\n')
      .filter((l) => l.startsWith('orchestrator_sampler_decisions_total{') && !l.endsWith(' 0'));

  /** Every exported span's parent was exported too (no orphan under a root that went missing). */
  const orphans = (spans: readonly ReadableSpan[]) => {
    const ids = new Set(spans.map((s) => s.spanContext().spanId));
    return spans.filter((s) => s.parentSpanContext && !ids.has(s.parentSpanContext.spanId));
  };

  /** Ratio 0, a running trace kept at 100 ms (max_age), `maxDecisions` decisions remembered. */
  const maxAgeSampling = (maxDecisions: number) => {
    const registry = new Registry();
    return {
      registry,
      ...sampledTracing({ ratio: 0, maxDecisionDelayMs: 100, maxDecisions, registry }),
    };
  };

  it('keeps the conversation span of a max_age trace whose decision other traces would have evicted, counted once', async () => {
    const { registry, exporter, sampler } = maxAgeSampling(1);
    const long = gated(1);
    for (let i = 0; i < 100 && sampler.pendingTraces > 0; i++) await sleep(20);
    await sleep(300);
    expect(sampler.pendingTraces).toBe(0);
    const traceId = long.conversations[0]?.traceId ?? '';
    expect(sampler.kept(traceId)).toBe(true);
    // Three conversations that converge (dropped at ratio 0) are decided while it runs: with
    // maxDecisions 1, each forgets the one before.
    const o = orchestrators([createConversationTelemetry()]);
    for (let i = 0; i < 3; i++) await o.converged.run({ sender: 'user', content: 0 });
    expect(sampler.kept(traceId)).toBe(true);
    long.gates[0]?.();
    await Promise.all(long.runs);
    const spans = exporter.getFinishedSpans();
    const conversation = spans.find((s) => s.name === 'invoke_workflow long');
    expect(conversation?.attributes['conversation.end.reason']).toBe('converged');
    expect(conversation?.attributes['conversation.sampler.rule']).toBe('max_age');
    expect(spans.map((s) => s.name)).toEqual(['llm.call', 'llm.call', 'invoke_workflow long']);
    expect(orphans(spans)).toEqual([]);
    // One decision per trace: the long one kept once, the three others dropped.
    expect(await decisions(registry)).toEqual([
      'orchestrator_sampler_decisions_total{decision="keep",rule="max_age"} 1',
      'orchestrator_sampler_decisions_total{decision="drop",rule="ratio"} 3',
    ]);
    // Ended, its decision is an ordinary one again: the newest, for late spans.
    expect(sampler.kept(traceId)).toBe(true);
  });

  it('pins at most maxDecisions running kept traces; past it the oldest is unpinned, and its conversation span still follows the keep', async () => {
    const { registry, exporter, sampler } = maxAgeSampling(2);
    const long = gated(3);
    for (let i = 0; i < 100 && (long.conversations.length < 3 || sampler.pendingTraces > 0); i++)
      await sleep(20);
    await sleep(300);
    const traces = long.conversations.map((c) => c.traceId);
    // The oldest pin went back to the decisions remembered, as their newest.
    expect(traces.map((t) => sampler.kept(t))).toEqual([true, true, true]);
    // Two dropped traces forget the unpinned one's decision and nothing of the pinned ones.
    const o = orchestrators([createConversationTelemetry()]);
    for (let i = 0; i < 2; i++) await o.converged.run({ sender: 'user', content: 0 });
    expect(traces.map((t) => sampler.kept(t))).toEqual([false, true, true]);
    for (const open of long.gates) open();
    await Promise.all(long.runs);
    const spans = exporter.getFinishedSpans();
    expect(spans.filter((s) => s.name === 'invoke_workflow long')).toHaveLength(3);
    expect(spans).toHaveLength(9);
    expect(orphans(spans)).toEqual([]);
    expect(await decisions(registry)).toEqual([
      'orchestrator_sampler_decisions_total{decision="keep",rule="max_age"} 3',
      'orchestrator_sampler_decisions_total{decision="drop",rule="ratio"} 2',
    ]);
  });

  it('holds nothing of conversations kept early that never end', async () => {
    const gc = (globalThis as { gc?: () => void }).gc as () => void;
    const { sampler } = sampledTracing({ ratio: 0, maxDecisionDelayMs: 100, maxDecisions: 10 });
    let abandoned: ReturnType<typeof gated> | undefined = gated(50);
    for (
      let i = 0;
      i < 100 && (abandoned.conversations.length < 50 || sampler.pendingTraces > 0);
      i++
    )
      await sleep(20);
    await sleep(300);
    const { conversations } = abandoned;
    expect(conversations.map((c) => c.span.deref() !== undefined)).not.toContain(false);
    // Past the bound, the 10 newest are pinned and the 10 before them remembered: no more.
    expect(conversations.map((c) => sampler.kept(c.traceId))).toEqual(
      Array.from({ length: 50 }, (_, i) => i >= 30),
    );
    // The app lets go of the conversations (their gates never open): nothing of them is left.
    abandoned = undefined;
    await sleep(0);
    gc();
    expect(conversations.filter((c) => c.span.deref() !== undefined)).toEqual([]);
    expect(sampler.pendingTraces).toBe(0);
    expect(sampler.bufferedSpans).toBe(0);
  });
});

describe('createConversationSampler: rules and edges', () => {
  it('keeps exactly the reasons given in keepReasons (failures always)', async () => {
    const { exporter, app } = sampledTracing({ ratio: 0, keepReasons: ['queue_exhausted'] });
    const o = orchestrators([createConversationTelemetry()]);
    const ids = new Map<Kind, string>();
    for (const kind of ['converged', 'queue_exhausted', 'error', 'max_dispatches'] as const) {
      ids.set(
        kind,
        (await inRequest(app, () => o[kind].run({ sender: 'user', content: 0 }))).traceId,
      );
    }
    expect(new Set(byTrace(exporter.getFinishedSpans()).keys())).toEqual(
      new Set([ids.get('queue_exhausted'), ids.get('error')]),
    );
  });

  it('decides a trace with nested conversations when the last one ends, kept if any of them is', async () => {
    const { exporter, sampler } = sampledTracing({ ratio: 0 });
    const telemetry = createConversationTelemetry();
    const inner = orchestrators([telemetry]).error;
    let innerTrace = '';
    const outer = numberConversation('outer', {
      responders: [
        {
          name: 'a',
          // The responder runs a conversation of its own, which fails; the outer one converges.
          respond: async (m) => {
            innerTrace = trace.getActiveSpan()?.spanContext().traceId ?? '';
            await inner.run({ sender: 'a', content: 0 }).catch(() => {});
            expect(sampler.pendingTraces).toBe(1);
            return { sender: 'a', content: m.content + 1 };
          },
        },
      ],
      termination: stopWhen((s) => s.projection > 0, 'converged'),
      observers: [telemetry],
    });
    await outer.run({ sender: 'user', content: 0 });
    const names = exporter.getFinishedSpans().map((s) => [s.name, s.spanContext().traceId]);
    expect(names).toEqual([
      ['llm.call', innerTrace],
      ['invoke_workflow error', innerTrace],
      ['invoke_workflow outer', innerTrace],
    ]);
    expect(sampler.pendingTraces).toBe(0);
  });

  it('reports a next processor that throws, and goes on', async () => {
    const { logger, warnings } = warningsLogger();
    const exporter = new InMemorySpanExporter();
    const simple = new SimpleSpanProcessor({ exporter: exporter });
    let fail = true;
    const { sampler, app } = sampledTracing({
      ratio: 1,
      logger,
      next: {
        onStart: (span, ctx) => simple.onStart(span as never, ctx),
        onEnd: (span) => {
          if (fail) throw new Error('exporter gone');
          simple.onEnd(span as never);
        },
        forceFlush: () => simple.forceFlush(),
        shutdown: () => simple.shutdown(),
      },
    });
    const o = orchestrators([createConversationTelemetry()]);
    await inRequest(app, () => o.converged.run({ sender: 'user', content: 0 }));
    expect(warnings).toEqual([
      'conversation-orchestrator: the sampler’s next span processor threw; the span is lost',
    ]);
    fail = false;
    const { traceId } = await inRequest(app, () => o.converged.run({ sender: 'user', content: 0 }));
    expect(new Set(exporter.getFinishedSpans().map((s) => s.spanContext().traceId))).toEqual(
      new Set([traceId]),
    );
    expect(sampler.bufferedSpans).toBe(0);
  });
});

describe('createConversationSampler: flush and shutdown', () => {
  it('shutdown() keeps and exports every buffered conversation, then shuts next down', async () => {
    const registry = new Registry();
    // An exporter that keeps what it exported after its shutdown (the in-memory one forgets).
    const exported: string[] = [];
    let exporterShutDown = false;
    const { sampler } = sampledTracing({
      ratio: 0,
      registry,
      next: new SimpleSpanProcessor({
        exporter: {
          export: (spans, done) => {
            exported.push(...spans.map((s) => s.name));
            done({ code: 0 });
          },
          shutdown: async () => {
            exporterShutDown = true;
          },
        },
      }),
    });
    const orchestrator = numberConversation('parked', {
      responders: [
        {
          name: 'a',
          respond: () => {
            llmCall();
            return new Promise<never>(() => {});
          },
        },
      ],
      termination: maxDispatches(1),
      observers: [createConversationTelemetry()],
    });
    for (let i = 0; i < 5; i++) void orchestrator.run({ sender: 'user', content: 0 });
    await sleep(10);
    expect(sampler.bufferedSpans).toBe(5);
    await sampler.shutdown();
    expect(exported).toEqual(Array(5).fill('llm.call'));
    expect(sampler.pendingTraces).toBe(0);
    expect(
      await registry.getSingleMetricAsString('orchestrator_sampler_decisions_total'),
    ).toContain('orchestrator_sampler_decisions_total{decision="keep",rule="shutdown"} 5');
    expect(exporterShutDown).toBe(true);
  });

  it('forceFlush() keeps and exports what is buffered', async () => {
    const { exporter, sampler, app } = sampledTracing({ ratio: 0 });
    let release: () => void = () => {};
    const orchestrator = numberConversation('parked', {
      responders: [
        afterLlmCall(
          () =>
            new Promise<void>((resolve) => {
              release = resolve;
            }),
        ),
      ],
      termination: maxDispatches(1),
      observers: [createConversationTelemetry()],
    });
    const run = app.startActiveSpan('request', (s: Span) =>
      orchestrator.run({ sender: 'user', content: 0 }).finally(() => s.end()),
    );
    await sleep(10);
    await sampler.forceFlush();
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(['llm.call']);
    release();
    await run;
    // Kept at the flush: the rest of the trace follows.
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual([
      'llm.call',
      'invoke_workflow parked',
      'request',
    ]);
    expect(exporter.getFinishedSpans()[1]?.attributes['conversation.sampler.rule']).toBe(
      'force_flush',
    );
  });

  it('refuses options it cannot honour, saying what came', () => {
    const next = new SimpleSpanProcessor({ exporter: new InMemorySpanExporter() });
    expect(() => createConversationSampler({ next, ratio: 2 })).toThrow(
      'Expected `ratio` to be a number from 0 to 1, got `2` (number)',
    );
    expect(() => createConversationSampler({ next: {} as never })).toThrow(
      'Expected `next` to be a span processor (onStart, onEnd, forceFlush, shutdown)',
    );
    expect(() => createConversationSampler({ next, maxSpansPerTrace: 0 })).toThrow(
      'Expected `maxSpansPerTrace` to be a positive integer, got `0` (number)',
    );
    expect(() => createConversationSampler({ next, keepReasons: 'timeout' as never })).toThrow(
      'Expected `keepReasons` to be an array of reason names',
    );
  });
});
