import { SpanKind, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  ConversationOrchestrator,
  type Message,
  maxDispatches,
  roundRobin,
} from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import { counterOrchestrator, desksOrchestrator, spread } from '../helpers/desks.ts';
import { startOf } from '../helpers/number-conversation.ts';
import {
  captureDiag,
  memoryTracing,
  restoreTracing,
  spansNamed,
  warningsLogger,
} from '../helpers/tracing.ts';

const counter = (
  telemetry: ReturnType<typeof createConversationTelemetry<number, number>>,
  extra: Parameters<typeof counterOrchestrator>[0] = {},
) => counterOrchestrator({ termination: maxDispatches(5), observers: [telemetry], ...extra });

/**
 * A conversation of strings `name` whose `bot` answers `answer(m)`, `dispatches` times, traced
 * by `tracer` with its content captured up to `maxContentLength`.
 */
const capturedChat = (
  name: string,
  tracer: Tracer,
  answer: (m: Message<string>) => string,
  dispatches: number,
  maxContentLength: number,
) =>
  new ConversationOrchestrator<string, string>({
    name,
    responders: [{ name: 'bot', respond: (m) => ({ sender: 'bot', content: answer(m) }) }],
    turnPolicy: roundRobin(),
    projection: { initial: () => '', fold: (_s, m) => m.content },
    termination: maxDispatches(dispatches),
    observers: [createConversationTelemetry({ tracer, captureContent: true, maxContentLength })],
  });

afterEach(() => {
  delete process.env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT;
  restoreTracing();
});

describe('the conversation span', () => {
  it('is one INTERNAL span per conversation with its attributes, status Unset, and one event per dispatch', async () => {
    const { exporter, tracer } = memoryTracing();
    const telemetry = createConversationTelemetry({
      tracer,
      stateAttributes: (s) => ({ 'desks.spread': spread(s.projection as never) }),
    });
    const result = await desksOrchestrator({ observers: [telemetry] }).run(
      { sender: 'user', content: 0 },
      { conversationId: 'conv-1' },
    );
    const [span, ...others] = spansNamed(exporter, 'invoke_workflow desks');
    expect(others).toEqual([]);
    expect(span?.kind).toBe(SpanKind.INTERNAL);
    // Instrumentation leaves OK to the application: a conversation that ends well stays Unset.
    expect(span?.status).toEqual({ code: SpanStatusCode.UNSET });
    expect(span?.attributes).toEqual({
      'gen_ai.operation.name': 'invoke_workflow',
      'gen_ai.workflow.name': 'desks',
      'gen_ai.conversation.id': 'conv-1',
      'conversation.responders': ['a', 'b', 'c'],
      'conversation.dispatch_count': 24,
      'conversation.end.reason': 'converged',
      // The anyOf member that decided, what it measured (the spread) and its tolerance.
      'conversation.end.policy': 'converged',
      'conversation.end.observed': result.decision.observed,
      'conversation.end.limit': 0.01,
      'conversation.elapsed_ms': result.elapsedMs,
      'conversation.dispatch_events.dropped': 0,
    });
    const events = span?.events ?? [];
    expect(events.map((e) => e.name)).toEqual(Array(24).fill('conversation.dispatch'));
    expect(events.map((e) => e.attributes?.['conversation.dispatch.count'])).toEqual(
      Array.from({ length: 24 }, (_, i) => i + 1),
    );
    expect(events.map((e) => e.attributes?.['gen_ai.agent.name']).slice(0, 4)).toEqual([
      'a',
      'b',
      'c',
      'a',
    ]);
    expect(events.map((e) => e.attributes?.['conversation.decision.terminate'])).toEqual([
      ...Array(23).fill(false),
      true,
    ]);
    expect(events.at(-1)?.attributes?.['conversation.decision.reason']).toBe('converged');
    expect(events[0]?.attributes?.['conversation.decision.reason']).toBe('continue');
    // The first desk moves halfway from 100 to the mean of 110 and 90: quotes 100, 110, 90 -> spread 20.
    expect(events[0]?.attributes?.['desks.spread']).toBe(20);
    expect(events.at(-1)?.attributes?.['desks.spread']).toBe(spread(result.state.projection));
    const elapsed = events.map((e) => e.attributes?.['conversation.dispatch.elapsed_ms'] as number);
    expect([...elapsed].sort((x, y) => x - y)).toEqual(elapsed);
  });

  it('ends with status Unset and the reason when the queue runs dry', async () => {
    const { exporter, tracer } = memoryTracing();
    const o = counter(createConversationTelemetry({ tracer }), {
      responders: [{ name: 'a', respond: () => undefined }],
    });
    await o.run({ sender: 'user', content: 0 });
    const [span] = spansNamed(exporter, 'invoke_workflow counter');
    expect(span?.status).toEqual({ code: SpanStatusCode.UNSET });
    expect(span?.attributes['conversation.end.reason']).toBe('queue_exhausted');
    expect(span?.attributes['error.type']).toBeUndefined();
    expect(span?.attributes['conversation.dispatch_count']).toBe(1);
  });

  it('ends with status ERROR, the responder’s own exception recorded and error.type its class when a responder fails', async () => {
    const { exporter, tracer } = memoryTracing();
    const o = counter(createConversationTelemetry({ tracer }), {
      responders: [
        {
          name: 'a',
          respond: (m: Message<number>) => {
            if (m.content === 2) throw new RangeError('model down');
            return { sender: 'a', content: m.content + 1 };
          },
        },
      ],
    });
    await expect(o.run({ sender: 'user', content: 0 })).rejects.toThrow(
      'Responder `a` failed: model down',
    );
    const [span] = spansNamed(exporter, 'invoke_workflow counter');
    expect(span?.status).toEqual({
      code: SpanStatusCode.ERROR,
      message: 'Responder `a` failed: model down',
    });
    expect(span?.attributes['conversation.end.reason']).toBe('error');
    // The responder's own error, with its throw site, not only the library's wrapper.
    expect(span?.attributes['error.type']).toBe('RangeError');
    expect(span?.attributes['conversation.dispatch_count']).toBe(2);
    const exception = span?.events.find((e) => e.name === 'exception');
    expect(exception?.attributes?.['exception.type']).toBe('RangeError');
    expect(exception?.attributes?.['exception.message']).toBe('model down');
    expect(String(exception?.attributes?.['exception.stacktrace'])).toMatch(
      /^RangeError: model down\n\s+at [^\n]*observability\/traces\.test\.ts/,
    );
  });

  it('ends with reason deadline and status ERROR when a responder hangs', async () => {
    const { exporter, tracer } = memoryTracing();
    const o = counter(createConversationTelemetry({ tracer }), {
      dispatchTimeoutMs: 10,
      responders: [{ name: 'a', respond: () => new Promise<never>(() => {}) }],
    });
    await expect(o.run({ sender: 'user', content: 0 })).rejects.toThrow('dispatch deadline');
    const [span] = spansNamed(exporter, 'invoke_workflow counter');
    expect(span?.status.code).toBe(SpanStatusCode.ERROR);
    expect(span?.attributes['conversation.end.reason']).toBe('deadline');
    expect(span?.attributes['error.type']).toBe('DispatchDeadlineError');
  });

  it('ends with reason aborted (status unset: the caller chose it) when aborted', async () => {
    const { exporter, tracer } = memoryTracing();
    const controller = new AbortController();
    const o = counter(createConversationTelemetry({ tracer }), {
      termination: maxDispatches(1e9),
      listener: (_s, _d, n) => {
        if (n === 7) controller.abort();
      },
    });
    await expect(
      o.run({ sender: 'user', content: 0 }, { signal: controller.signal }),
    ).rejects.toThrow('aborted');
    const [span] = spansNamed(exporter, 'invoke_workflow counter');
    expect(span?.status).toEqual({ code: SpanStatusCode.UNSET });
    expect(span?.attributes['conversation.end.reason']).toBe('aborted');
    expect(span?.attributes['error.type']).toBeUndefined();
    expect(span?.events.some((e) => e.name === 'exception')).toBe(false);
    expect(span?.attributes['conversation.dispatch_count']).toBe(7);
    expect(span?.events).toHaveLength(7);
  });

  it('keeps the first and the last dispatch events of a 10,000-dispatch conversation and counts the rest', async () => {
    const { exporter, tracer } = memoryTracing();
    await counter(createConversationTelemetry({ tracer }), {
      termination: maxDispatches(10_000),
    }).run({
      sender: 'user',
      content: 0,
    });
    const [span] = spansNamed(exporter, 'invoke_workflow counter');
    const counts = span?.events.map((e) => e.attributes?.['conversation.dispatch.count']);
    expect(counts).toEqual([
      ...Array.from({ length: 64 }, (_, i) => i + 1),
      ...Array.from({ length: 64 }, (_, i) => 10_000 - 63 + i),
    ]);
    expect(span?.attributes['conversation.dispatch_events.dropped']).toBe(10_000 - 128);
    expect(span?.droppedEventsCount).toBe(0);
    expect(span?.events.at(-1)?.attributes?.['conversation.decision.terminate']).toBe(true);
  });

  it('makes the cap an option', async () => {
    const { exporter, tracer } = memoryTracing();
    await counter(createConversationTelemetry({ tracer, maxDispatchEvents: 5 }), {
      termination: maxDispatches(100),
    }).run({ sender: 'user', content: 0 });
    const [span] = spansNamed(exporter, 'invoke_workflow counter');
    expect(span?.events.map((e) => e.attributes?.['conversation.dispatch.count'])).toEqual([
      1, 2, 3, 99, 100,
    ]);
    expect(span?.attributes['conversation.dispatch_events.dropped']).toBe(95);
  });

  it('writes each event with the time of its dispatch', async () => {
    const { exporter, tracer } = memoryTracing();
    await counter(createConversationTelemetry({ tracer }), {
      responders: [
        {
          name: 'a',
          respond: async (m: Message<number>) => {
            await new Promise((r) => setTimeout(r, 20));
            return { sender: 'a', content: m.content + 1 };
          },
        },
      ],
      termination: maxDispatches(3),
    }).run({ sender: 'user', content: 0 });
    const [span] = spansNamed(exporter, 'invoke_workflow counter');
    const toMs = (t: [number, number]) => t[0] * 1000 + t[1] / 1e6;
    const start = toMs(span?.startTime as [number, number]);
    const offsets = (span?.events ?? []).map((e) => toMs(e.time) - start);
    const recorded = (span?.events ?? []).map(
      (e) => e.attributes?.['conversation.dispatch.elapsed_ms'] as number,
    );
    offsets.forEach((o, i) => {
      expect(o).toBeCloseTo(recorded[i] as number, 0);
    });
    expect(offsets[0]).toBeGreaterThanOrEqual(15);
    expect(offsets[2]).toBeGreaterThanOrEqual(55);
  });
});

describe('responder spans', () => {
  it('keep the answer of a responder that returns a minimal foreign thenable', async () => {
    const { exporter, tracer } = memoryTracing();
    const thenable = (m: Message<number>) => ({
      // biome-ignore lint/suspicious/noThenProperty: a foreign thenable is the point
      then(resolve: (value: Message<number>) => void) {
        setTimeout(() => resolve({ sender: 'a', content: m.content + 1 }), 0);
      },
    });
    const o = counter(createConversationTelemetry({ tracer, responderSpans: true }), {
      responders: [
        {
          name: 'a',
          respond: thenable as unknown as (m: Message<number>) => Promise<Message<number>>,
        },
      ],
      termination: maxDispatches(3),
    });
    const result = await o.run({ sender: 'user', content: 0 });
    expect(result.decision.reason).toBe('max_dispatches');
    expect(result.state.projection).toBe(6);
    expect(spansNamed(exporter, 'invoke_agent a')).toHaveLength(3);
  });

  it('are children of the conversation span, and spans a responder starts nest under them', async () => {
    // The responder's own tracer comes from the global provider, as an instrumentation's would.
    const { exporter, tracer } = memoryTracing();
    const o = counter(createConversationTelemetry({ tracer, responderSpans: true }), {
      responders: [
        {
          name: 'llm',
          respond: async (m: Message<number>) => {
            // Stands in for an instrumented HTTP call to a model.
            await trace.getTracer('http').startActiveSpan('POST /v1/chat', async (http) => {
              await new Promise((r) => setTimeout(r, 1));
              http.end();
            });
            return { sender: 'llm', content: m.content + 1 };
          },
        },
      ],
      termination: maxDispatches(2),
    });
    await o.run({ sender: 'user', content: 0 });
    const [conversation] = spansNamed(exporter, 'invoke_workflow counter');
    const agents = spansNamed(exporter, 'invoke_agent llm');
    const calls = spansNamed(exporter, 'POST /v1/chat');
    expect(agents).toHaveLength(2);
    expect(calls).toHaveLength(2);
    agents.forEach((agent, i) => {
      expect(agent.parentSpanContext?.spanId).toBe(conversation?.spanContext().spanId);
      expect(agent.spanContext().traceId).toBe(conversation?.spanContext().traceId);
      expect(agent.attributes).toMatchObject({
        'gen_ai.operation.name': 'invoke_agent',
        'gen_ai.agent.name': 'llm',
        'gen_ai.conversation.id': conversation?.attributes['gen_ai.conversation.id'],
      });
      expect(calls[i]?.parentSpanContext?.spanId).toBe(agent.spanContext().spanId);
    });
    expect(agents.map((a) => a.attributes['conversation.dispatch.number'])).toEqual([1, 2]);
    expect(agents.every((a) => a.status.code === SpanStatusCode.UNSET)).toBe(true);
  });

  it('mark a failed invocation ERROR with the exception and its error.type', async () => {
    const { exporter, tracer } = memoryTracing();
    const o = counter(createConversationTelemetry({ tracer, responderSpans: true }), {
      responders: [
        {
          name: 'llm',
          respond: async () => {
            throw new RangeError('context too long');
          },
        },
      ],
    });
    await expect(o.run({ sender: 'user', content: 0 })).rejects.toThrow('context too long');
    const [agent] = spansNamed(exporter, 'invoke_agent llm');
    expect(agent?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'context too long' });
    expect(agent?.attributes['error.type']).toBe('RangeError');
    expect(agent?.events.map((e) => e.attributes?.['exception.type'])).toEqual(['RangeError']);
  });

  it('end once when an answer arrives after the abort that ended them, with no SDK diagnostic', async () => {
    const diagnostics = captureDiag();
    const { exporter, tracer } = memoryTracing();
    const controller = new AbortController();
    let answered = false;
    const o = counter(createConversationTelemetry({ tracer, responderSpans: true }), {
      responders: [
        {
          name: 'slow',
          respond: async (m: Message<number>) => {
            controller.abort();
            await new Promise((r) => setTimeout(r, 20));
            answered = true;
            return { sender: 'slow', content: m.content + 1 };
          },
        },
      ],
    });
    await expect(
      o.run({ sender: 'user', content: 0 }, { signal: controller.signal }),
    ).rejects.toThrow('aborted');
    await vi.waitFor(() => expect(answered).toBe(true));
    // The late answer's continuation has run once the responder's promise settled.
    await new Promise((r) => setImmediate(r));
    // A caller's abort is not an error: the cut-short span is Unset and says why it ended.
    const [agent] = spansNamed(exporter, 'invoke_agent slow');
    expect(agent?.status.code).toBe(SpanStatusCode.UNSET);
    expect(agent?.attributes['error.type']).toBeUndefined();
    expect(agent?.attributes['conversation.end.reason']).toBe('aborted');
    expect(agent?.attributes['conversation.abort.reason']).toBe('AbortError');
    expect(agent?.events).toEqual([]);
    expect(spansNamed(exporter, 'invoke_agent slow')).toHaveLength(1);
    expect(diagnostics).toEqual([]);
  });

  it('end failed when an answer’s then getter throws, and the conversation fails', async () => {
    const diagnostics = captureDiag();
    const { exporter, tracer } = memoryTracing();
    const hostile = Object.defineProperty({}, 'then', {
      get() {
        throw new TypeError('no then for you');
      },
    });
    const o = counter(createConversationTelemetry({ tracer, responderSpans: true }), {
      responders: [{ name: 'odd', respond: () => hostile as never }],
    });
    await expect(o.run({ sender: 'user', content: 0 })).rejects.toThrow('no then for you');
    const agents = spansNamed(exporter, 'invoke_agent odd');
    expect(agents).toHaveLength(1);
    expect(agents[0]?.attributes['error.type']).toBe('TypeError');
    expect(spansNamed(exporter, 'invoke_workflow counter')[0]?.status.code).toBe(
      SpanStatusCode.ERROR,
    );
    expect(diagnostics).toEqual([]);
  });

  it('carry the responder’s gen_ai.provider.name, and the documented default when it declares none', async () => {
    const { exporter, tracer } = memoryTracing();
    const o = counter(createConversationTelemetry({ tracer, responderSpans: true }), {
      responders: [
        {
          name: 'gpt',
          provider: 'openai',
          respond: (m) => ({ sender: 'gpt', content: m.content + 1 }),
        },
        { name: 'rules', respond: (m) => ({ sender: 'rules', content: m.content + 1 }) },
      ],
      termination: maxDispatches(2),
    });
    await o.run({ sender: 'user', content: 0 });
    const [gpt] = spansNamed(exporter, 'invoke_agent gpt');
    const [rules] = spansNamed(exporter, 'invoke_agent rules');
    expect(gpt?.attributes['gen_ai.provider.name']).toBe('openai');
    expect(rules?.attributes['gen_ai.provider.name']).toBe('_OTHER');
  });
});

describe('concurrency', () => {
  it('keeps 200 concurrent conversations apart: each trace holds exactly its own events', async () => {
    const { exporter, tracer } = memoryTracing();
    const telemetry = createConversationTelemetry<number, number>({
      tracer,
      stateAttributes: (s) => ({ 'test.conversation': s.conversationId }),
    });
    // Conversation i ends after i % 7 + 3 dispatches.
    const lengths = Array.from({ length: 200 }, (_, i) => (i % 7) + 3);
    await Promise.all(
      lengths.map((n, i) =>
        new ConversationOrchestrator<number, number>({
          name: 'concurrent',
          responders: ['a', 'b'].map((name) => ({
            name,
            respond: async (m: Message<number>) => {
              await new Promise((r) => setTimeout(r, Math.random() * 3));
              return { sender: name, content: m.content + 1 };
            },
          })),
          turnPolicy: roundRobin(),
          projection: { initial: () => 0, fold: (s, m) => s + m.content },
          termination: maxDispatches(n),
          observers: [telemetry],
        }).run({ sender: 'user', content: 0 }, { conversationId: `conv-${i}` }),
      ),
    );
    const spans = spansNamed(exporter, 'invoke_workflow concurrent');
    expect(spans).toHaveLength(200);
    expect(new Set(spans.map((s) => s.spanContext().traceId)).size).toBe(200);
    for (const span of spans) {
      const id = span.attributes['gen_ai.conversation.id'] as string;
      const n = lengths[Number(id.slice(5))] as number;
      expect(span.events.map((e) => e.attributes?.['conversation.dispatch.count'])).toEqual(
        Array.from({ length: n }, (_, k) => k + 1),
      );
      expect(new Set(span.events.map((e) => e.attributes?.['test.conversation']))).toEqual(
        new Set([id]),
      );
    }
  });
});

describe('message content', () => {
  it('is cut without splitting a surrogate pair, and stays valid UTF-8', async () => {
    const { exporter, tracer } = memoryTracing();
    const o = capturedChat('emoji', tracer, () => '\ud800 lone', 1, 4);
    // Three emoji are six UTF-16 units; four units would end inside the second one.
    await o.run({ sender: 'user', content: '😀😀😀' });
    const [span] = spansNamed(exporter, 'invoke_workflow emoji');
    expect(span?.attributes['conversation.input.content']).toBe('😀…');
    // A lone surrogate cannot be encoded in UTF-8: it becomes U+FFFD.
    expect(span?.events[0]?.attributes?.['conversation.dispatch.content']).toBe('\ufffd l…');
  });

  it('copies stateAttributes when the dispatch happens, so a reused object rewrites nothing', async () => {
    const { exporter, tracer } = memoryTracing();
    const reused: { 'test.total': number; 'test.path': number[] } = {
      'test.total': 0,
      'test.path': [],
    };
    await counter(
      createConversationTelemetry<number, number>({
        tracer,
        stateAttributes: (state) => {
          reused['test.total'] = state.projection;
          reused['test.path'].push(state.dispatchCount);
          return reused;
        },
      }),
    ).run({ sender: 'user', content: 0 });
    const [span] = spansNamed(exporter, 'invoke_workflow counter');
    expect(span?.events.map((e) => e.attributes?.['test.total'])).toEqual([1, 3, 6, 10, 15]);
    expect(span?.events.map((e) => e.attributes?.['test.path'])).toEqual([
      [1],
      [1, 2],
      [1, 2, 3],
      [1, 2, 3, 4],
      [1, 2, 3, 4, 5],
    ]);
  });

  it('reports a throwing stateAttributes through the logger, rate-limited, and keeps the events', async () => {
    const { exporter, tracer } = memoryTracing();
    const { logger, warnings } = warningsLogger();
    await counter(
      createConversationTelemetry<number, number>({
        tracer,
        logger,
        stateAttributes: () => {
          throw new Error('bug');
        },
      }),
    ).run({ sender: 'user', content: 0 });
    const [span] = spansNamed(exporter, 'invoke_workflow counter');
    expect(span?.events).toHaveLength(5);
    // Five failures within ten seconds: the first is said at once, the rest wait for the next line.
    expect(warnings).toEqual([
      'conversation-orchestrator: stateAttributes failed; the dispatch event is recorded without them',
    ]);
  });

  it('reports a stateAttributes that returns no object, saying what came', async () => {
    const { exporter, tracer } = memoryTracing();
    const errors: unknown[] = [];
    const { logger } = warningsLogger();
    await counter(
      createConversationTelemetry<number, number>({
        tracer,
        logger: { ...logger, warn: (_message: string, error: unknown) => errors.push(error) },
        stateAttributes: (state) => state.projection as never,
      }),
    ).run({ sender: 'user', content: 0 });
    const [span] = spansNamed(exporter, 'invoke_workflow counter');
    expect(span?.events).toHaveLength(5);
    expect(errors.map(String)).toEqual([
      'TypeError: Expected `stateAttributes` to return an object of attributes, got `1` (number)',
    ]);
  });

  const input = { sender: 'user', content: 0 };
  it('is never recorded by default', async () => {
    const { exporter, tracer } = memoryTracing();
    await counter(createConversationTelemetry({ tracer })).run(input);
    const [span] = spansNamed(exporter, 'invoke_workflow counter');
    expect(span?.attributes['conversation.input.content']).toBeUndefined();
    expect(
      span?.events.some((e) => e.attributes?.['conversation.dispatch.content'] !== undefined),
    ).toBe(false);
  });

  it('is recorded, truncated, when the user opts in', async () => {
    const { exporter, tracer } = memoryTracing();
    const o = capturedChat('chat', tracer, (m) => `${m.content}!`.repeat(3), 2, 8);
    await o.run({ sender: 'user', content: 'hi' });
    const [span] = spansNamed(exporter, 'invoke_workflow chat');
    expect(span?.attributes['conversation.input.content']).toBe('hi');
    // 'hi!hi!hi!' and 'hi!hi!hi!!hi!hi!hi!!…' both cut to 7 characters and an ellipsis.
    expect(span?.events.map((e) => e.attributes?.['conversation.dispatch.content'])).toEqual([
      'hi!hi!h…',
      'hi!hi!h…',
    ]);
  });

  it('is recorded when OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true', async () => {
    process.env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT = 'true';
    const { exporter, tracer } = memoryTracing();
    await counter(createConversationTelemetry({ tracer })).run(input);
    const [span] = spansNamed(exporter, 'invoke_workflow counter');
    expect(span?.attributes['conversation.input.content']).toBe('0');
    expect(span?.events[0]?.attributes?.['conversation.dispatch.content']).toBe('1');
  });
});

describe('without a tracer provider', () => {
  const start = startOf('counter');

  it('takes no per-dispatch hook at all when there is nothing to record', async () => {
    trace.disable();
    const observation = createConversationTelemetry().startConversation(start);
    expect(observation.onDispatch).toBeUndefined();
    expect(observation.runResponder).toBeUndefined();
    const result = await counter(createConversationTelemetry()).run({ sender: 'user', content: 0 });
    expect(result.dispatchCount).toBe(5);
  });

  it('counts metrics only (no span events, no responder spans) when given a registry', () => {
    trace.disable();
    const observation = createConversationTelemetry({
      registry: new Registry(),
      responderSpans: true,
    }).startConversation(start);
    expect(typeof observation.onDispatch).toBe('function');
    expect(observation.runResponder).toBeUndefined();
  });
});
