/**
 * Issue 18: nothing the app hands the plugin (content, stateAttributes results, thrown values)
 * can lose a conversation's span or metrics, and what it hands in is read with a budget.
 */
import { SpanStatusCode } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { type Message, maxDispatches } from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import { counterOrchestrator } from '../helpers/desks.ts';
import { memoryTracing, restoreTracing, spansNamed, warningsLogger } from '../helpers/tracing.ts';

afterEach(restoreTracing);

function revoked(): object {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

function cyclicNullPrototype(): object {
  const node = Object.create(null) as Record<string, unknown>;
  node.price = 101.5;
  node.self = node;
  return node;
}

const dispatchEvents = (span: ReadableSpan | undefined) =>
  (span?.events ?? []).filter((e) => e.name === 'conversation.dispatch');

/**
 * The plugin's own attributes of an event (written before the state attributes, so the SDK keeps
 * all of them): past the limit, the SDK drops as many state attributes as these take.
 */
const own = (event: { attributes?: Record<string, unknown> }) =>
  Object.keys(event.attributes ?? {}).filter((k) => !k.startsWith('desks.')).length;

/** A 10-dispatch counter conversation whose responders answer `content(n)`. */
function hostileContent(
  telemetry: ReturnType<typeof createConversationTelemetry<number, unknown>>,
  content: (n: number) => unknown,
) {
  let n = 0;
  return counterOrchestrator({
    observers: [telemetry as never],
    responders: ['a', 'b'].map((name) => ({
      name,
      respond: () => ({ sender: name, content: content(++n) as number }),
    })),
    // Counts messages: the content is the plugin's to read, not the projection's.
    projection: { initial: () => 0, fold: (s) => s + 1 },
    termination: maxDispatches(10),
  });
}

describe('content that cannot be printed costs an attribute, never the conversation', () => {
  it.each([
    ['a cyclic null-prototype object', cyclicNullPrototype, '{"price":101.5,"self":"[Circular]"}'],
    ['a revoked Proxy', revoked, '[unserialisable content: TypeError]'],
  ])(
    'keeps the span, its 10 events and the metrics when the input is %s',
    async (_, make, shown) => {
      const { exporter, tracer } = memoryTracing();
      const registry = new Registry();
      const { logger, warnings } = warningsLogger();
      const telemetry = createConversationTelemetry<number, unknown>({
        tracer,
        registry,
        logger,
        captureContent: true,
      });
      await hostileContent(telemetry, (n) => n).run({
        sender: 'user',
        content: make() as unknown as number,
      });
      const [span] = spansNamed(exporter, 'invoke_workflow counter');
      expect(span?.attributes['conversation.input.content']).toBe(shown);
      expect(dispatchEvents(span)).toHaveLength(10);
      const exposition = await registry.metrics();
      expect(exposition).toContain(
        'orchestrator_conversations_ended_total{orchestrator="counter",reason="max_dispatches"} 1',
      );
      expect(warnings).toEqual(
        shown.startsWith('[unserialisable')
          ? [
              'conversation-orchestrator: a message content could not be serialised; it is recorded as `[unserialisable content: <class>]`',
            ]
          : [],
      );
    },
  );

  it.each([
    ['a cyclic null-prototype object', cyclicNullPrototype, '{"price":101.5,"self":"[Circular]"}'],
    ['a revoked Proxy', revoked, '[unserialisable content: TypeError]'],
    [
      'an object with a throwing getter',
      () =>
        Object.defineProperty({ ok: 1 }, 'secret', {
          enumerable: true,
          get() {
            throw new RangeError('no');
          },
        }),
      '[unserialisable content: RangeError]',
    ],
  ])('keeps all 10 dispatch events when a responder answers %s', async (_, make, shown) => {
    const { exporter, tracer } = memoryTracing();
    const telemetry = createConversationTelemetry<number, unknown>({
      tracer,
      logger: warningsLogger().logger,
      captureContent: true,
    });
    await hostileContent(telemetry, make).run({ sender: 'user', content: 0 });
    const events = dispatchEvents(spansNamed(exporter, 'invoke_workflow counter')[0]);
    expect(events.map((e) => e.attributes?.['conversation.dispatch.content'])).toEqual(
      Array.from({ length: 10 }, () => shown),
    );
  });

  it('reads a content getter inside the guard', async () => {
    const { exporter, tracer } = memoryTracing();
    const telemetry = createConversationTelemetry<number, unknown>({
      tracer,
      logger: warningsLogger().logger,
      captureContent: true,
    });
    const input = Object.defineProperty({ sender: 'user' }, 'content', {
      get() {
        throw new TypeError('content gone');
      },
    }) as Message<number>;
    await hostileContent(telemetry, (n) => n).run(input);
    const [span] = spansNamed(exporter, 'invoke_workflow counter');
    expect(span?.attributes['conversation.input.content']).toBe(
      '[unserialisable content: TypeError]',
    );
    expect(dispatchEvents(span)).toHaveLength(10);
  });

  it('serialises a huge content within the budget: it stops reading once maxContentLength is reached', async () => {
    const { exporter, tracer } = memoryTracing();
    let reads = 0;
    const huge: Record<string, number> = {};
    for (let i = 0; i < 20_000; i++) {
      Object.defineProperty(huge, `k${i}`, {
        enumerable: true,
        get() {
          reads++;
          return i;
        },
      });
    }
    const telemetry = createConversationTelemetry<number, unknown>({
      tracer,
      captureContent: true,
      maxContentLength: 64,
    });
    await hostileContent(telemetry, () => huge).run({ sender: 'user', content: 0 });
    const events = dispatchEvents(spansNamed(exporter, 'invoke_workflow counter')[0]);
    const first = events[0]?.attributes?.['conversation.dispatch.content'] as string;
    expect(first).toBe(`${JSON.stringify(huge).slice(0, 63)}…`);
    expect(first).toHaveLength(64);
    // 10 dispatches, each reading at most ~64 / 6 keys (and JSON.stringify above read 20,000).
    expect(reads - 20_000).toBeLessThanOrEqual(10 * 12);
  });

  it('cuts a 9 MB string content and reads nothing past the budget', async () => {
    const { exporter, tracer } = memoryTracing();
    const telemetry = createConversationTelemetry<number, unknown>({
      tracer,
      captureContent: true,
    });
    let reads = 0;
    const rest = new Proxy(
      Array.from({ length: 1_000_000 }, (_, i) => i),
      {
        get(target, key) {
          reads++;
          return Reflect.get(target, key);
        },
      },
    );
    const big = { text: 'x'.repeat(9_000_000), rest };
    await hostileContent(telemetry, () => big).run({ sender: 'user', content: 0 });
    const events = dispatchEvents(spansNamed(exporter, 'invoke_workflow counter')[0]);
    expect(events).toHaveLength(10);
    expect(events[0]?.attributes?.['conversation.dispatch.content']).toBe(
      `{"text":"${'x'.repeat(1024 - 9 - 1)}…`,
    );
    // The budget is spent on the text: the million-element array is never read.
    expect(reads).toBe(0);
  });
});

describe('stateAttributes results that cannot be read cost what cannot be read', () => {
  it.each([
    [
      'an object with a throwing getter',
      () =>
        Object.defineProperty({ 'desks.spread': 1 }, 'desks.secret', {
          enumerable: true,
          get() {
            throw new Error('no');
          },
        }),
      { 'desks.spread': 1 },
    ],
    [
      'a Proxy whose ownKeys throws',
      () =>
        new Proxy(
          { 'desks.spread': 1 },
          {
            ownKeys() {
              throw new Error('no keys');
            },
          },
        ),
      {},
    ],
    ['a revoked Proxy', revoked, {}],
  ])(
    'keeps all 10 dispatch events when stateAttributes returns %s, and says so once',
    async (_, make, kept) => {
      const { exporter, tracer } = memoryTracing();
      const { logger, warnings } = warningsLogger();
      const telemetry = createConversationTelemetry<number, unknown>({
        tracer,
        logger,
        stateAttributes: make as never,
      });
      await hostileContent(telemetry, (n) => n).run({ sender: 'user', content: 0 });
      const events = dispatchEvents(spansNamed(exporter, 'invoke_workflow counter')[0]);
      expect(events).toHaveLength(10);
      for (const event of events) {
        const own = Object.fromEntries(
          Object.entries(event.attributes ?? {}).filter(([k]) => k.startsWith('desks.')),
        );
        expect(own).toEqual(kept);
        expect(event.attributes?.['conversation.dispatch.count']).toBeTypeOf('number');
      }
      expect(warnings).toEqual([
        'conversation-orchestrator: stateAttributes failed; the dispatch event is recorded without them',
      ]);
    },
  );

  it('reports each kind of failure under its own rate limit: a second kind is not silenced', async () => {
    const { tracer } = memoryTracing();
    const { logger, warnings } = warningsLogger();
    const telemetry = createConversationTelemetry<number, unknown>({
      tracer,
      logger,
      captureContent: true,
      stateAttributes: () => {
        throw new Error('bug');
      },
    });
    await hostileContent(telemetry, revoked).run({ sender: 'user', content: 0 });
    expect(warnings.sort()).toEqual([
      'conversation-orchestrator: a message content could not be serialised; it is recorded as `[unserialisable content: <class>]`',
      'conversation-orchestrator: stateAttributes failed; the dispatch event is recorded without them',
    ]);
  });

  it('copies at most the room the event attribute limit leaves beside the plugin’s own from a 30,000-key result', async () => {
    const { exporter, tracer } = memoryTracing({ attributePerEventCountLimit: 16 });
    let reads = 0;
    const many = new Proxy(
      Object.fromEntries(Array.from({ length: 30_000 }, (_, i) => [`desks.k${i}`, i])),
      {
        get(target, key) {
          reads++;
          return Reflect.get(target, key);
        },
      },
    );
    const telemetry = createConversationTelemetry<number, unknown>({
      tracer,
      stateAttributes: () => many,
    });
    await hostileContent(telemetry, (n) => n).run({ sender: 'user', content: 0 });
    const events = dispatchEvents(spansNamed(exporter, 'invoke_workflow counter')[0]);
    expect(events).toHaveLength(10);
    // 16 less the 11 attributes the plugin may write itself: 5 state attributes per event, the
    // SDK drops nothing, and 30,000 keys cost 5 reads a dispatch.
    expect(events.map((e) => e.droppedAttributesCount)).toEqual(Array(10).fill(0));
    expect(events.map((e) => Object.keys(e.attributes ?? {}).length - own(e))).toEqual(
      Array(10).fill(5),
    );
    expect(reads).toBe(10 * 5);
  });

  it('copies at most 128 - 11 when the span says no limit of its own', async () => {
    const { exporter, tracer } = memoryTracing();
    const many = Object.fromEntries(Array.from({ length: 30_000 }, (_, i) => [`desks.k${i}`, i]));
    const telemetry = createConversationTelemetry<number, unknown>({
      tracer,
      stateAttributes: () => many,
    });
    await hostileContent(telemetry, (n) => n).run({ sender: 'user', content: 0 });
    const events = dispatchEvents(spansNamed(exporter, 'invoke_workflow counter')[0]);
    expect(events.map((e) => e.droppedAttributesCount)).toEqual(Array(10).fill(0));
    expect(events.map((e) => Object.keys(e.attributes ?? {}).length - own(e))).toEqual(
      Array(10).fill(117),
    );
  });
});

describe('stateAttributes never take the place of the plugin’s own event attributes', () => {
  const forged = () => ({
    'conversation.dispatch.count': 999,
    'conversation.decision.reason': 'forged',
    'gen_ai.agent.name': 'mallory',
    'desks.spread': 0.5,
  });
  /** A traced telemetry whose stateAttributes are `forged`, its logger's warnings collected. */
  const forgingTelemetry = <C>() => {
    const { exporter, tracer } = memoryTracing();
    const { logger, warnings } = warningsLogger();
    const telemetry = createConversationTelemetry<number, C>({
      tracer,
      logger,
      stateAttributes: forged,
    });
    return { exporter, tracer, warnings, telemetry };
  };

  it('keeps the plugin’s values when stateAttributes returns its names, and reports each clash once', async () => {
    const { exporter, warnings, telemetry } = forgingTelemetry<unknown>();
    await hostileContent(telemetry, (n) => n).run({ sender: 'user', content: 0 });
    const events = dispatchEvents(spansNamed(exporter, 'invoke_workflow counter')[0]);
    expect(
      events.map((e) => [
        e.attributes?.['conversation.dispatch.count'],
        e.attributes?.['conversation.decision.reason'],
        e.attributes?.['gen_ai.agent.name'],
        e.attributes?.['desks.spread'],
      ]),
    ).toEqual(
      Array.from({ length: 10 }, (_, i) => [
        i + 1,
        i === 9 ? 'max_dispatches' : 'continue',
        i % 2 === 0 ? 'a' : 'b',
        0.5,
      ]),
    );
    const said = (key: string) =>
      `conversation-orchestrator: stateAttributes returned \`${key}\`, an attribute of the plugin's own; the plugin's value is kept and this one dropped (said once)`;
    expect(warnings).toEqual([
      said('conversation.dispatch.count'),
      said('conversation.decision.reason'),
      said('gen_ai.agent.name'),
    ]);
  });

  it('keeps them on the events of telemetry.listener() too', async () => {
    const { exporter, tracer, warnings, telemetry } = forgingTelemetry<number>();
    const orchestrator = counterOrchestrator({ listener: telemetry.listener('counter') });
    await tracer.startActiveSpan('around', async (span) => {
      await orchestrator.run({ sender: 'user', content: 0 });
      span.end();
    });
    const events = dispatchEvents(spansNamed(exporter, 'around')[0]);
    expect(events.map((e) => e.attributes?.['conversation.dispatch.count'])).toEqual(
      Array.from({ length: 10 }, (_, i) => i + 1),
    );
    expect(new Set(events.map((e) => e.attributes?.['conversation.decision.reason']))).toEqual(
      new Set(['continue', 'max_dispatches']),
    );
    expect(events.map((e) => e.attributes?.['gen_ai.agent.name'])).toEqual(
      Array.from({ length: 10 }, (_, i) => ['a', 'b', 'c'][i % 3]),
    );
    expect(warnings).toHaveLength(3);
  });

  it('keeps conversation.dispatch.content and every attribute of its own beside 200 state attributes', async () => {
    const { exporter, tracer } = memoryTracing();
    const state = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`desks.k${i}`, i]));
    const telemetry = createConversationTelemetry<number, unknown>({
      tracer,
      captureContent: true,
      stateAttributes: () => state,
    });
    await hostileContent(telemetry, (n) => `quote ${n}`).run({ sender: 'user', content: 0 });
    const events = dispatchEvents(spansNamed(exporter, 'invoke_workflow counter')[0]);
    expect(events.map((e) => e.attributes?.['conversation.dispatch.content'])).toEqual(
      Array.from({ length: 10 }, (_, i) => `quote ${i + 1}`),
    );
    expect(events.map((e) => e.droppedAttributesCount)).toEqual(Array(10).fill(0));
    // The SDK's 128 less the plugin's 11: the first 117 state keys, in their order.
    const stateKeys = (e: (typeof events)[number]) =>
      Object.keys(e.attributes ?? {}).filter((k) => k.startsWith('desks.'));
    expect(events.map(stateKeys)).toEqual(
      Array(10).fill(Array.from({ length: 117 }, (_, i) => `desks.k${i}`)),
    );
  });
});

describe('thrown values that cannot be read', () => {
  it.each([
    ['a revoked Proxy', revoked, '_OTHER'],
    ['a cyclic null-prototype object', cyclicNullPrototype, '_OTHER'],
    [
      'an Error whose stack getter throws',
      () =>
        Object.defineProperty(new SyntaxError('bad'), 'stack', {
          get() {
            throw new Error('no stack');
          },
        }),
      'SyntaxError',
    ],
  ])(
    'end the span failed, its events and metrics kept, when a responder throws %s',
    async (_, make, type) => {
      const { exporter, tracer } = memoryTracing();
      const registry = new Registry();
      const telemetry = createConversationTelemetry<number, unknown>({
        tracer,
        registry,
        logger: warningsLogger().logger,
      });
      let n = 0;
      const o = counterOrchestrator({
        observers: [telemetry as never],
        responders: [
          {
            name: 'a',
            respond: (m) => {
              if (++n === 4) throw make();
              return { sender: 'a', content: m.content + 1 };
            },
          },
        ],
      });
      await expect(o.run({ sender: 'user', content: 0 })).rejects.toThrow('Responder `a` failed');
      const [span] = spansNamed(exporter, 'invoke_workflow counter');
      expect(span?.status.code).toBe(SpanStatusCode.ERROR);
      expect(span?.attributes['error.type']).toBe(type);
      expect(dispatchEvents(span)).toHaveLength(3);
      expect(span?.events.filter((e) => e.name === 'exception')).toHaveLength(1);
      expect(await registry.metrics()).toContain(
        'orchestrator_responder_errors_total{orchestrator="counter",responder="a"} 1',
      );
    },
  );
});

describe('thrown values reach the span bounded and as what was thrown', () => {
  const failing = (
    thrown: () => unknown,
    telemetry: ReturnType<typeof createConversationTelemetry<number, number>>,
  ) =>
    counterOrchestrator({
      observers: [telemetry],
      responders: [
        {
          name: 'a',
          respond: () => {
            throw thrown();
          },
        },
      ],
    });

  it('cuts a 9 MB error message to a bounded status message and exception event', async () => {
    const { exporter, tracer } = memoryTracing();
    const telemetry = createConversationTelemetry<number, number>({ tracer, responderSpans: true });
    await failing(() => new Error('x'.repeat(9_000_000)), telemetry)
      .run({ sender: 'user', content: 0 })
      .catch(() => {});
    const spans = exporter.getFinishedSpans();
    expect(spans).toHaveLength(2);
    for (const span of spans) {
      expect(span.status.code).toBe(SpanStatusCode.ERROR);
      expect(span.status.message?.length ?? 0).toBeLessThanOrEqual(2_048);
      const exception = span.events.find((e) => e.name === 'exception');
      expect(String(exception?.attributes?.['exception.message']).length).toBeLessThanOrEqual(
        2_048,
      );
      expect(String(exception?.attributes?.['exception.stacktrace']).length).toBeLessThanOrEqual(
        8_192,
      );
    }
  });

  it('gives `throw undefined` error.type _OTHER on the conversation span, like any non-Error', async () => {
    const { exporter, tracer } = memoryTracing();
    const telemetry = createConversationTelemetry<number, number>({ tracer });
    await failing(() => undefined, telemetry)
      .run({ sender: 'user', content: 0 })
      .catch(() => {});
    const [span] = spansNamed(exporter, 'invoke_workflow counter');
    expect(span?.attributes['error.type']).toBe('_OTHER');
  });
});
