import { spawnSync } from 'node:child_process';
import { trace } from '@opentelemetry/api';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { maxDispatches, stopWhen, type TerminationPolicy, tokenBudget } from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import { metricsFor } from '../../src/observability/metric-sets.ts';
import { OVERFLOW_LABEL_VALUE } from '../../src/observability/semconv.ts';
import { counterOrchestrator } from '../helpers/desks.ts';
import { numberConversation, startOf } from '../helpers/number-conversation.ts';
import {
  dispatchCounts,
  memoryTracing,
  range,
  restoreTracing,
  spansNamed,
  warningsLogger,
} from '../helpers/tracing.ts';
import { deliveredTracing, openMetricsRegistry } from './delivered-tracing.ts';

afterEach(restoreTracing);

type Telemetry = ReturnType<typeof createConversationTelemetry<number, number>>;

const counter = (telemetry: Telemetry, n = 5, name = 'counter') =>
  counterOrchestrator({ name, termination: maxDispatches(n), observers: [telemetry] });

/** Runs a counter of `n` dispatches from 0 under a telemetry of `options`. */
const runCounter = (
  options: Parameters<typeof createConversationTelemetry<number, number>>[0],
  n?: number,
) =>
  counter(createConversationTelemetry<number, number>(options), n).run({
    sender: 'user',
    content: 0,
  });

/** `name{labels} value` lines of an exposition, as a map. */
function samples(text: string): Map<string, number> {
  const map = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const m = /^(\S+?(?:\{[^}]*\})?) (\S+)/.exec(line);
    if (m) map.set(m[1] as string, Number(m[2]));
  }
  return map;
}

/** Each series of `expected` has its value in `s` (undefined: no such series). */
function expectSeries(s: Map<string, number>, expected: Record<string, number | undefined>): void {
  for (const [series, value] of Object.entries(expected)) expect(s.get(series), series).toBe(value);
}

/**
 * The counters of `orchestrator`'s conversations, every one ended max_dispatches: its dispatches
 * per responder, `conversations` started and ended, none in progress.
 */
function expectCounted(
  s: Map<string, number>,
  orchestrator: string,
  dispatches: Record<string, number>,
  conversations: number,
): void {
  const of = `orchestrator="${orchestrator}"`;
  expectSeries(s, {
    ...Object.fromEntries(
      Object.entries(dispatches).map(([responder, n]) => [
        `orchestrator_dispatches_total{${of},responder="${responder}"}`,
        n,
      ]),
    ),
    [`orchestrator_conversations_started_total{${of}}`]: conversations,
    [`orchestrator_conversations_ended_total{${of},reason="max_dispatches"}`]: conversations,
    [`orchestrator_conversations_in_progress{${of}}`]: 0,
  });
}

describe('metrics', () => {
  it('counts dispatches per responder and conversations per reason, exactly', async () => {
    const registry = new Registry();
    const telemetry = createConversationTelemetry<number, number>({ registry });
    const o = counter(telemetry, 5);
    await o.run({ sender: 'user', content: 0 });
    await o.run({ sender: 'user', content: 0 });
    const s = samples(await registry.metrics());
    expectCounted(s, 'counter', { a: 4, b: 4, c: 2 }, 2);
    expectSeries(s, {
      // Known label values start at 0, so rates and ratios see zeros instead of no data.
      'orchestrator_conversations_ended_total{orchestrator="counter",reason="error"}': 0,
      // Responder errors are not pre-created: one zero series per responder is not worth a scrape.
      'orchestrator_responder_errors_total{orchestrator="counter",responder="c"}': undefined,
      'orchestrator_listener_errors_total{orchestrator="counter"}': 0,
      'orchestrator_conversation_dispatches_count{orchestrator="counter",reason="max_dispatches"}': 2,
      'orchestrator_conversation_dispatches_sum{orchestrator="counter",reason="max_dispatches"}': 10,
      'orchestrator_conversation_dispatches_bucket{le="2",orchestrator="counter",reason="max_dispatches"}': 0,
      'orchestrator_conversation_dispatches_bucket{le="5",orchestrator="counter",reason="max_dispatches"}': 2,
      'orchestrator_dispatch_duration_seconds_count{orchestrator="counter",responder="a"}': 4,
      'orchestrator_dispatch_duration_seconds_bucket{le="+Inf",orchestrator="counter",responder="a"}': 4,
      'orchestrator_conversation_duration_seconds_count{orchestrator="counter",reason="max_dispatches"}': 2,
    });
    // A second scrape adds nothing: counters are handed to prom-client exactly once.
    const again = samples(await registry.metrics());
    expect(again.get('orchestrator_dispatches_total{orchestrator="counter",responder="a"}')).toBe(
      4,
    );
  });

  it('shows a conversation in progress while it runs', async () => {
    const registry = new Registry();
    const telemetry = createConversationTelemetry<number, number>({ registry });
    let release: () => void = () => {};
    const o = numberConversation('waiting', {
      responders: [
        { name: 'a', respond: () => new Promise((r) => (release = () => r(undefined))) },
      ],
      termination: maxDispatches(1),
      observers: [telemetry],
    });
    const running = o.run({ sender: 'user', content: 0 });
    expect(
      samples(await registry.metrics()).get(
        'orchestrator_conversations_in_progress{orchestrator="waiting"}',
      ),
    ).toBe(1);
    release();
    await running;
    expect(
      samples(await registry.metrics()).get(
        'orchestrator_conversations_in_progress{orchestrator="waiting"}',
      ),
    ).toBe(0);
  });

  it('counts a listener promise that rejects after its run settled, as onListenerError hears of it', async () => {
    const registry = new Registry();
    const telemetry = createConversationTelemetry<number, number>({ registry });
    const rejections: (() => void)[] = [];
    const heard: string[] = [];
    const o = numberConversation('late', {
      responders: ['a'],
      termination: maxDispatches(3),
      // Each dispatch's promise rejects only when the test says so: after the run settled.
      listener: (_s, _d, n) =>
        new Promise((_resolve, reject) => {
          rejections.push(() => reject(new Error(`late ${n}`)));
        }),
      onListenerError: (e) => heard.push((e as Error).message),
      observers: [telemetry],
    });
    const result = await o.run({ sender: 'user', content: 0 });
    expect(result.dispatchCount).toBe(3);
    const before = samples(await registry.metrics());
    expect(before.get('orchestrator_listener_errors_total{orchestrator="late"}')).toBe(0);
    for (const reject of rejections) reject();
    await new Promise((r) => setImmediate(r));
    expect(heard).toEqual(['late 1', 'late 2', 'late 3']);
    const after = samples(await registry.metrics());
    expect(after.get('orchestrator_listener_errors_total{orchestrator="late"}')).toBe(3);
    expect(after.get('orchestrator_conversations_in_progress{orchestrator="late"}')).toBe(0);
  });

  it('counts responder failures, listener errors and failed conversations', async () => {
    const registry = new Registry();
    const telemetry = createConversationTelemetry<number, number>({ registry });
    const o = numberConversation('faulty', {
      responders: [
        {
          name: 'flaky',
          respond: (m) => {
            if (m.content === 2) throw new Error('down');
            return { sender: 'flaky', content: m.content + 1 };
          },
        },
      ],
      termination: maxDispatches(10),
      listener: () => {
        throw new Error('listener bug');
      },
      onListenerError: () => {},
      observers: [telemetry],
    });
    await expect(o.run({ sender: 'user', content: 0 })).rejects.toThrow('down');
    const s = samples(await registry.metrics());
    expect(
      s.get('orchestrator_responder_errors_total{orchestrator="faulty",responder="flaky"}'),
    ).toBe(1);
    expect(s.get('orchestrator_listener_errors_total{orchestrator="faulty"}')).toBe(2);
    expect(
      s.get('orchestrator_conversations_ended_total{orchestrator="faulty",reason="error"}'),
    ).toBe(1);
    expect(s.get('orchestrator_conversations_in_progress{orchestrator="faulty"}')).toBe(0);
  });

  it('passes promtool check metrics without a word', async () => {
    const registry = new Registry();
    await runCounter({ registry });
    const result = spawnSync('promtool', ['check', 'metrics'], {
      input: await registry.metrics(),
      encoding: 'utf8',
    });
    expect(result.stderr + result.stdout).toBe('');
    expect(result.status).toBe(0);
  });

  it('lets two telemetry instances share one registry', async () => {
    const registry = new Registry();
    const first = createConversationTelemetry<number, number>({ registry });
    const second = createConversationTelemetry<number, number>({ registry });
    await counter(first, 2, 'one').run({ sender: 'user', content: 0 });
    await counter(second, 3, 'two').run({ sender: 'user', content: 0 });
    const s = samples(await registry.metrics());
    expect(
      s.get('orchestrator_conversations_ended_total{orchestrator="one",reason="max_dispatches"}'),
    ).toBe(1);
    expect(
      s.get('orchestrator_conversations_ended_total{orchestrator="two",reason="max_dispatches"}'),
    ).toBe(1);
    expect(() =>
      createConversationTelemetry({ registry, dispatchDurationBuckets: [1, 2] }),
    ).toThrow('already registered on this registry with other buckets');
  });

  it('starts counting from zero after registry.resetMetrics(), and re-registers after registry.clear()', async () => {
    const registry = new Registry();
    const o = counter(createConversationTelemetry<number, number>({ registry }), 3);
    await o.run({ sender: 'user', content: 0 });
    registry.resetMetrics();
    await o.run({ sender: 'user', content: 0 });
    let s = samples(await registry.metrics());
    expect(s.get('orchestrator_dispatches_total{orchestrator="counter",responder="a"}')).toBe(1);
    expect(
      s.get(
        'orchestrator_conversation_dispatches_count{orchestrator="counter",reason="max_dispatches"}',
      ),
    ).toBe(1);
    registry.clear();
    await runCounter({ registry }, 3);
    s = samples(await registry.metrics());
    expect(s.get('orchestrator_dispatches_total{orchestrator="counter",responder="a"}')).toBe(1);
    expect(s.get('orchestrator_conversations_started_total{orchestrator="counter"}')).toBe(1);
  });

  it('never uses the global default registry unless given it', async () => {
    const { register } = await import('prom-client');
    await runCounter({ registry: new Registry() });
    expect(register.getSingleMetric('orchestrator_dispatches_total')).toBeUndefined();
  });

  it("counts tokenBudget()'s token_budget under its own label, even past maxReasons", async () => {
    const registry = new Registry();
    const telemetry = createConversationTelemetry<number, number>({ registry, maxReasons: 1 });
    const run = (termination: TerminationPolicy<number, number>) =>
      numberConversation('budgets', {
        responders: [
          {
            name: 'a',
            respond: (_m, _s, context) => {
              context.reportUsage({ inputTokens: 10, outputTokens: 5 });
              return { sender: 'a', content: 1 };
            },
          },
        ],
        termination,
        observers: [telemetry],
      }).run({ sender: 'user', content: 0 });
    await run(stopWhen(() => true, 'alpha'));
    await run(stopWhen(() => true, 'beta'));
    await run(tokenBudget({ total: 30 }));
    const s = samples(await registry.metrics());
    expect(
      s.get('orchestrator_conversations_ended_total{orchestrator="budgets",reason="token_budget"}'),
    ).toBe(1);
    expect(
      s.get('orchestrator_conversations_ended_total{orchestrator="budgets",reason="other"}'),
    ).toBe(1);
  });

  it('keeps reason labels bounded: past maxReasons a new reason becomes other', async () => {
    const registry = new Registry();
    const telemetry = createConversationTelemetry<number, number>({ registry, maxReasons: 2 });
    for (const reason of ['alpha', 'beta', 'gamma', 'delta']) {
      await numberConversation('reasons', {
        responders: [{ name: 'a', respond: () => ({ sender: 'a', content: 1 }) }],
        termination: stopWhen(() => true, reason),
        observers: [telemetry],
      }).run({ sender: 'user', content: 0 });
    }
    // (The built-in reasons' series start at 0 and are left out here.)
    const ended = [...samples(await registry.metrics()).entries()].filter(
      ([k, v]) => k.startsWith('orchestrator_conversations_ended_total') && v > 0,
    );
    expect(Object.fromEntries(ended)).toEqual({
      'orchestrator_conversations_ended_total{orchestrator="reasons",reason="alpha"}': 1,
      'orchestrator_conversations_ended_total{orchestrator="reasons",reason="beta"}': 1,
      'orchestrator_conversations_ended_total{orchestrator="reasons",reason="other"}': 2,
    });
  });

  it('takes configurable buckets and rejects bad ones clearly', async () => {
    const registry = new Registry();
    await counter(
      createConversationTelemetry<number, number>({
        registry,
        conversationDispatchBuckets: [3, 30],
      }),
    ).run({
      sender: 'user',
      content: 0,
    });
    const text = await registry.metrics();
    expect(text).toContain(
      'orchestrator_conversation_dispatches_bucket{le="3",orchestrator="counter",reason="max_dispatches"} 0',
    );
    expect(text).toContain(
      'orchestrator_conversation_dispatches_bucket{le="30",orchestrator="counter",reason="max_dispatches"} 1',
    );
    expect(() =>
      createConversationTelemetry({ registry: new Registry(), dispatchDurationBuckets: [2, 1] }),
    ).toThrow(
      'Expected `dispatchDurationBuckets` to be a non-empty array of finite numbers in increasing order, got `[2,1]` (array)',
    );
  });

  it('attaches the trace id as an exemplar on an OpenMetrics registry, once the trace is delivered', async () => {
    const registry = openMetricsRegistry();
    const { exporter, tracer, provider } = deliveredTracing(registry);
    await runCounter({ registry, tracer });
    // Not before its export is heard: the in-memory exporter answers on a timer.
    expect(await registry.metrics()).not.toContain('# {trace_id=');
    await provider.forceFlush();
    const [span] = spansNamed(exporter, 'invoke_workflow counter');
    const traceId = span?.spanContext().traceId as string;
    const text = await registry.metrics();
    const withExemplar = text.split('\n').filter((l) => l.includes(`# {trace_id="${traceId}"}`));
    const names = new Set(withExemplar.map((l) => l.split('{')[0]));
    expect(names).toEqual(
      new Set([
        'orchestrator_dispatch_duration_seconds_bucket',
        'orchestrator_conversation_duration_seconds_bucket',
        'orchestrator_conversation_dispatches_bucket',
      ]),
    );
    // Counters get the OpenMetrics `_total` treatment and the exposition ends with # EOF.
    expect(text).toContain('orchestrator_dispatches_total{orchestrator="counter",responder="a"} 2');
    expect(text.trimEnd().endsWith('# EOF')).toBe(true);
  });

  it('shows the latest delivered trace as the dispatch exemplar after each scrape', async () => {
    const registry = openMetricsRegistry();
    const { exporter, tracer, provider } = deliveredTracing(registry);
    const o = counter(createConversationTelemetry<number, number>({ registry, tracer }));
    const dispatchExemplars = (text: string) =>
      new Set(
        text
          .split('\n')
          .filter((l) => l.startsWith('orchestrator_dispatch_duration_seconds_bucket'))
          .flatMap((l) => /# \{trace_id="(\w+)"\}/.exec(l)?.[1] ?? []),
      );
    await o.run({ sender: 'user', content: 0 });
    await provider.forceFlush();
    const first = dispatchExemplars(await registry.metrics());
    await o.run({ sender: 'user', content: 0 });
    await provider.forceFlush();
    const second = dispatchExemplars(await registry.metrics());
    const [one, two] = spansNamed(exporter, 'invoke_workflow counter').map(
      (s) => s.spanContext().traceId,
    );
    expect(first).toEqual(new Set([one]));
    expect(second.has(two as string)).toBe(true);
  });

  it('records conversation histograms on an OpenMetrics registry when no trace is sampled', async () => {
    trace.disable();
    const registry = openMetricsRegistry();
    await runCounter({ registry });
    const text = await registry.metrics();
    expect(text).toContain(
      'orchestrator_conversation_dispatches_count{orchestrator="counter",reason="max_dispatches"} 1',
    );
    expect(text).not.toContain('# {trace_id=');
  });

  it('refuses exemplars on a Prometheus-text registry', () => {
    expect(() =>
      createConversationTelemetry({ registry: new Registry(), exemplars: true }),
    ).toThrow('Expected `exemplars` to be used with an OpenMetrics registry');
  });

  it('works as a plain listener (the seed SPI)', async () => {
    const registry = new Registry();
    const telemetry = createConversationTelemetry<number, number>({ registry });
    const o = numberConversation('seed', {
      responders: ['a', 'b'],
      termination: maxDispatches(3),
      listener: telemetry.listener('seed'),
    });
    await o.run({ sender: 'user', content: 0 });
    const s = samples(await registry.metrics());
    // A listener sees no starts or failures, so it leaves the in-progress gauge alone (at 0).
    expectCounted(s, 'seed', { a: 2, b: 1 }, 1);
    expect(
      s.get(
        'orchestrator_conversation_dispatches_sum{orchestrator="seed",reason="max_dispatches"}',
      ),
    ).toBe(3);
  });
});

describe('metrics stay exact and bounded on hostile input', () => {
  const start = startOf('hostile');
  const info = (durationMs: number, dispatchCount: number) => ({
    state: {} as never,
    decision: { terminate: false, reason: 'continue' },
    dispatchCount,
    elapsedMs: dispatchCount,
    responderIndex: 0,
    durationMs,
  });

  it('never counts a NaN, infinite or negative observation into a histogram', async () => {
    const registry = new Registry();
    const telemetry = createConversationTelemetry({ registry });
    const observation = telemetry.startConversation(start);
    const durations = [2, Number.NaN, -5, Number.POSITIVE_INFINITY, 7];
    durations.forEach((ms, i) => {
      observation.onDispatch?.(info(ms, i + 1));
    });
    // The plain listener is handed numbers by whoever calls it.
    telemetry.listener('hostile')(
      { lastMessage: { sender: 'a', content: 0 } } as never,
      { terminate: true, reason: 'converged' },
      3,
      Number.NaN,
    );
    const s = samples(await registry.metrics());
    const series = (name: string, labels: string) => (suffix: string, le?: string) =>
      s.get(`${name}_${suffix}{${le === undefined ? '' : `le="${le}",`}${labels}}`);
    const dispatch = series(
      'orchestrator_dispatch_duration_seconds',
      'orchestrator="hostile",responder="a"',
    );
    expect(dispatch('count')).toBe(2);
    expect(dispatch('sum')).toBeCloseTo(0.009, 12);
    expect(dispatch('bucket', '0.000001')).toBe(0);
    expect(dispatch('bucket', '0.005')).toBe(1);
    expect(dispatch('bucket', '+Inf')).toBe(2);
    const duration = series(
      'orchestrator_conversation_duration_seconds',
      'orchestrator="hostile",reason="converged"',
    );
    expect(duration('count')).toBe(0);
    expect(duration('sum')).toBe(0);
    expect(duration('bucket', '0.0001')).toBe(0);
    // The dispatches themselves are still counted.
    expect(s.get('orchestrator_dispatches_total{orchestrator="hostile",responder="a"}')).toBe(6);
  });

  it('keeps no key per reason past maxReasons, however many distinct reasons come', async () => {
    const registry = new Registry();
    const metrics = metricsFor(
      registry,
      {
        buckets: {
          dispatchDuration: [1],
          conversationDuration: [1],
          conversationDispatches: [1],
          conversationTokens: [1],
        },
        exemplars: false,
        maxReasons: 3,
        maxOrchestrators: 200,
        maxResponders: 100,
        maxModels: 50,
      },
      warningsLogger().logger,
    );
    const record = metrics.orchestrator('many');
    const before = record.ends.size;
    for (let i = 0; i < 10_000; i++) metrics.countEnd(record, `reason_${i}`, 0.1, 1);
    // Three user reasons and `other`: the other 9,997 left nothing behind.
    expect(record.ends.size).toBe(before + 4);
    const s = samples(await registry.metrics());
    expect(
      s.get('orchestrator_conversations_ended_total{orchestrator="many",reason="other"}'),
    ).toBe(9_997);
    expect(
      s.get('orchestrator_conversations_ended_total{orchestrator="many",reason="reason_2"}'),
    ).toBe(1);
  });

  it('warns when a second telemetry on the registry asks for other maxReasons or exemplars', () => {
    const registry = openMetricsRegistry();
    const { logger, warnings } = warningsLogger();
    createConversationTelemetry({ registry, logger });
    createConversationTelemetry({ registry, logger });
    expect(warnings).toEqual([]);
    createConversationTelemetry({ registry, logger, maxReasons: 5, exemplars: false });
    expect(warnings).toEqual([
      'conversation-orchestrator: the orchestrator metrics on this registry were set up by an earlier telemetry with maxReasons 20 and exemplars on; this telemetry asked for maxReasons 5 and exemplars off, and shares the earlier settings',
    ]);
  });

  it('rejects what is not a registry, saying what came', () => {
    expect(() => createConversationTelemetry({ registry: {} as never })).toThrow(
      'Expected `registry` to be a prom-client Registry (registerMetric(), getSingleMetric(), metrics() and a contentType), got `{}` (object)',
    );
  });

  it('registers nothing when another library already took one of its names', async () => {
    const registry = new Registry();
    const { Counter } = await import('prom-client');
    new Counter({ name: 'orchestrator_dispatches_total', help: 'x', registers: [registry] });
    expect(() => createConversationTelemetry({ registry })).toThrow(
      'Could not register the orchestrator metrics: a metric named `orchestrator_dispatches_total` is already registered on this registry (another library uses the name)',
    );
    expect(registry.getMetricsAsArray().map((m) => m.name)).toEqual([
      'orchestrator_dispatches_total',
    ]);
  });
});

describe('the plain listener (the seed SPI)', () => {
  const orchestrator = (listener: ReturnType<Telemetry['listener']>, n: number) =>
    numberConversation('seed', {
      responders: ['a'],
      termination: maxDispatches(n),
      listener,
    });

  it('keeps the first and the last dispatch events on the active span and counts the rest', async () => {
    const { exporter, tracer } = memoryTracing();
    const telemetry = createConversationTelemetry<number, number>({ tracer });
    await tracer.startActiveSpan('request', async (span) => {
      await orchestrator(telemetry.listener('seed'), 300).run({ sender: 'user', content: 0 });
      span.end();
    });
    const [span] = spansNamed(exporter, 'request');
    expect(dispatchCounts(span)).toEqual([...range(1, 64), ...range(237, 300)]);
    expect(span?.attributes['conversation.dispatch_events.dropped']).toBe(172);
    expect(span?.droppedEventsCount).toBe(0);
  });

  it('counts what it could not write when it never sees the end (an abort)', async () => {
    const { exporter, tracer } = memoryTracing();
    const telemetry = createConversationTelemetry<number, number>({ tracer });
    const controller = new AbortController();
    const listener = telemetry.listener('seed');
    await tracer.startActiveSpan('request', async (span) => {
      const o = orchestrator((state, decision, count, elapsed) => {
        listener(state, decision, count, elapsed);
        if (count === 200) controller.abort();
      }, 1e9);
      await o.run({ sender: 'user', content: 0 }, { signal: controller.signal }).catch(() => {});
      span.end();
    });
    const [span] = spansNamed(exporter, 'request');
    expect(dispatchCounts(span)).toEqual(range(1, 64));
    expect(span?.attributes['conversation.dispatch_events.dropped']).toBe(136);
    expect(span?.droppedEventsCount).toBe(0);
  });

  it('counts a sender that is not a valid name under the overflow value, never as a label', async () => {
    const registry = new Registry();
    const { exporter, tracer } = memoryTracing();
    const telemetry = createConversationTelemetry<number, number>({ registry, tracer });
    const huge = 'x'.repeat(1_000_000);
    const o = numberConversation('seed', {
      responders: [{ name: 'a', respond: (m) => ({ sender: huge, content: m.content + 1 }) }],
      termination: maxDispatches(3),
      listener: telemetry.listener('seed'),
    });
    await tracer.startActiveSpan('request', async (span) => {
      await o.run({ sender: 'user', content: 0 });
      span.end();
    });
    const exposition = await registry.metrics();
    expect(exposition.length).toBeLessThan(100_000);
    expect(exposition).toContain(
      `orchestrator_dispatches_total{orchestrator="seed",responder="${OVERFLOW_LABEL_VALUE}"} 3`,
    );
    const [span] = spansNamed(exporter, 'request');
    const names = (span?.events ?? []).map((e) => String(e.attributes?.['gen_ai.agent.name']));
    expect(names).toEqual(['x'.repeat(128), 'x'.repeat(128), 'x'.repeat(128)]);
  });

  it('validates the name it is given like an orchestrator name', () => {
    const telemetry = createConversationTelemetry();
    expect(() => telemetry.listener('desks {prod}')).toThrow(
      'Expected `name` to be a name of 1-64 characters (ASCII letters, digits, `_`, `.`, `:` or `-`) starting with a letter, a digit or `_`, got `"desks {prod}"` (string)',
    );
  });
});

describe('the dispatch-duration exposition', () => {
  async function both(openMetrics: boolean) {
    const registry = openMetrics ? openMetricsRegistry() : new Registry();
    const { tracer, provider } = openMetrics ? deliveredTracing(registry) : memoryTracing();
    await runCounter({ registry, tracer }, 30);
    await provider.forceFlush();
    const metric = registry.getSingleMetric(
      'orchestrator_dispatch_duration_seconds',
    ) as unknown as {
      get(): unknown;
      getForPromString(): unknown;
    };
    const fast = await registry.getSingleMetricAsString('orchestrator_dispatch_duration_seconds');
    // The same metric formatted by prom-client itself, from the structured values.
    // (`getMetricsAsString` is prom-client's formatter; its typings leave it out.)
    const format = registry as unknown as { getMetricsAsString(m: unknown): Promise<string> };
    const viaPromClient = await format.getMetricsAsString({ ...metric, get: () => metric.get() });
    return { fast, viaPromClient };
  }

  it('formats exactly as prom-client does, in Prometheus text', async () => {
    const { fast, viaPromClient } = await both(false);
    expect(fast.split('\n')).toHaveLength(2 + 3 * 22);
    expect(fast).toBe(viaPromClient);
  });

  it('formats exactly as prom-client does, in OpenMetrics with exemplars', async () => {
    const { fast, viaPromClient } = await both(true);
    expect(fast).toContain(' # {trace_id="');
    expect(fast).toBe(viaPromClient);
  });

  it('falls back to prom-client when the registry has default labels', async () => {
    const registry = new Registry();
    registry.setDefaultLabels({ service: 'desks' });
    await runCounter({ registry });
    const text = await registry.metrics();
    expect(text).toContain(
      'orchestrator_dispatch_duration_seconds_count{service="desks",orchestrator="counter",responder="a"} 2',
    );
    const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(lint.stdout + lint.stderr).toBe('');
  });
});
