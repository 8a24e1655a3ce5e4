/**
 * Issue 19, telemetry: tokens on invoke_agent spans (GenAI names), on dispatch events and on the
 * conversation span, and in the metrics (orchestrator_tokens_total exactly, failed invocations
 * included; orchestrator_conversation_tokens); nothing when nothing reports.
 */
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import fc from 'fast-check';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ConversationOrchestrator,
  type Message,
  maxDispatches,
  type Responder,
  type TurnFunction,
  type Usage,
} from '../../src/index.ts';
import { createConversationTelemetry, semconv } from '../../src/observability/index.ts';
import { cappedTelemetry, memoryTracing, restoreTracing, spansNamed } from '../helpers/tracing.ts';
import {
  deliveredTracing,
  openMetricsRegistry,
  sampledDeliveredTracing,
} from './delivered-tracing.ts';

afterEach(restoreTracing);

/** A responder that reports `perInvocation[i]` on its i-th invocation (cycling) and answers. */
function reporting(
  name: string,
  perInvocation: readonly (readonly Usage[])[],
  extra: Partial<Responder<number, number>> & { failOn?: number } = {},
): Responder<number, number> {
  let invocation = 0;
  return {
    name,
    ...extra,
    respond: async (m: Message<number>, _s, context) => {
      const i = invocation++;
      for (const usage of perInvocation[i % perInvocation.length] ?? []) context.reportUsage(usage);
      await Promise.resolve();
      if (i === extra.failOn) throw new Error(`${name} failed after spending`);
      return { sender: name, content: m.content + 1 };
    },
  };
}

/**
 * Round robin over the responders, or every responder for every message (`all`), as a function
 * so that it can report through its context.
 */
function turns(report?: Usage, all = false): TurnFunction<number, number> {
  let next = 0;
  return (_m, _s, responders, context) => {
    if (report !== undefined) context.reportUsage(report);
    return all
      ? [...responders]
      : [responders[next++ % responders.length] as Responder<number, number>];
  };
}

function orchestrator(
  telemetry: ReturnType<typeof createConversationTelemetry<number, number>>,
  responders: Responder<number, number>[],
  extra: Partial<ConstructorParameters<typeof ConversationOrchestrator<number, number>>[0]> = {},
) {
  return new ConversationOrchestrator<number, number>({
    name: 'llm',
    responders,
    turnPolicy: turns(),
    projection: { initial: () => 0, fold: (_s, m) => m.content },
    termination: maxDispatches(4),
    observers: [telemetry],
    ...extra,
  });
}

const dispatchEvents = (span: ReadableSpan | undefined) =>
  (span?.events ?? []).filter((e) => e.name === 'conversation.dispatch');

async function samples(registry: Registry): Promise<Map<string, number>> {
  const map = new Map<string, number>();
  for (const line of (await registry.metrics()).split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const cut = line.lastIndexOf(' ');
    map.set(line.slice(0, cut), Number(line.slice(cut + 1)));
  }
  return map;
}

describe('invoke_agent spans', () => {
  it('carry the invocation’s summed gen_ai.usage.* tokens and its gen_ai.request.model', async () => {
    const { exporter, tracer } = memoryTracing();
    const telemetry = createConversationTelemetry<number, number>({ tracer, responderSpans: true });
    const writer = reporting(
      'writer',
      [
        [
          { inputTokens: 100, outputTokens: 20, cacheReadInputTokens: 30, model: 'gpt-4o-mini' },
          { inputTokens: 50, outputTokens: 10, reasoningOutputTokens: 5, model: 'gpt-4o' },
        ],
      ],
      { provider: 'openai' },
    );
    await orchestrator(telemetry, [writer], { termination: maxDispatches(1) }).run({
      sender: 'user',
      content: 0,
    });
    const [span] = spansNamed(exporter, 'invoke_agent writer');
    expect(span?.attributes).toMatchObject({
      'gen_ai.provider.name': 'openai',
      'gen_ai.usage.input_tokens': 150,
      'gen_ai.usage.output_tokens': 30,
      'gen_ai.usage.cache_read.input_tokens': 30,
      'gen_ai.usage.reasoning.output_tokens': 5,
      'gen_ai.request.model': 'gpt-4o',
    });
  });

  it('always carry gen_ai.provider.name: _OTHER by default, or the telemetry’s defaultProviderName', async () => {
    for (const [options, shown] of [
      [{}, '_OTHER'],
      [{ defaultProviderName: 'in_house' }, 'in_house'],
    ] as const) {
      const { exporter, tracer } = memoryTracing();
      const telemetry = createConversationTelemetry<number, number>({
        tracer,
        responderSpans: true,
        ...options,
      });
      await orchestrator(telemetry, [reporting('desk', [[]])], {
        termination: maxDispatches(1),
      }).run({ sender: 'user', content: 0 });
      const [span] = spansNamed(exporter, 'invoke_agent desk');
      expect(span?.attributes['gen_ai.provider.name']).toBe(shown);
      // Nothing reported: no usage attributes at all.
      expect(
        Object.keys(span?.attributes ?? {}).filter((k) => k.startsWith('gen_ai.usage')),
      ).toEqual([]);
      expect(span?.attributes['gen_ai.request.model']).toBeUndefined();
      restoreTracing();
    }
    expect(() => createConversationTelemetry({ defaultProviderName: 'bad name' })).toThrow(
      /Expected `defaultProviderName`/,
    );
  });

  it('carry the tokens of an invocation that failed', async () => {
    const { exporter, tracer } = memoryTracing();
    const telemetry = createConversationTelemetry<number, number>({ tracer, responderSpans: true });
    const flaky = reporting('flaky', [[{ inputTokens: 7, outputTokens: 3 }]], { failOn: 1 });
    await orchestrator(telemetry, [flaky], { onResponderError: 'skip' })
      .run({ sender: 'user', content: 0 })
      .catch(() => {});
    const failed = spansNamed(exporter, 'invoke_agent flaky').filter(
      (s) => s.attributes['error.type'] !== undefined,
    );
    expect(failed).toHaveLength(1);
    expect(failed[0]?.attributes['gen_ai.usage.input_tokens']).toBe(7);
    expect(failed[0]?.attributes['gen_ai.usage.output_tokens']).toBe(3);
  });
});

describe('dispatch events and the conversation span', () => {
  it('give each dispatch its own tokens and the conversation its totals, failed invocations included', async () => {
    const { exporter, tracer } = memoryTracing();
    const telemetry = createConversationTelemetry<number, number>({ tracer });
    const a = reporting('a', [[{ inputTokens: 10, outputTokens: 1 }], []]);
    // b's second invocation fails after spending; its tokens are in the totals, not in a dispatch.
    const b = reporting('b', [[{ inputTokens: 20, outputTokens: 2 }]], { failOn: 1 });
    const result = await orchestrator(telemetry, [a, b], {
      onResponderError: 'skip',
      termination: maxDispatches(4),
      turnPolicy: turns({ inputTokens: 1000, outputTokens: 1 }, true),
    }).run({ sender: 'user', content: 0 });
    const [span] = spansNamed(exporter, 'invoke_workflow llm');
    const events = dispatchEvents(span).map((e) => [
      e.attributes?.['gen_ai.agent.name'],
      e.attributes?.['conversation.dispatch.usage.input_tokens'],
      e.attributes?.['conversation.dispatch.usage.output_tokens'],
    ]);
    // The input: a, b; a's answer: a (reports nothing), b fails after spending; b's answer: a.
    expect(events).toEqual([
      ['a', 10, 1],
      ['b', 20, 2],
      ['a', undefined, undefined],
      ['a', 10, 1],
    ]);
    // Three turn policy calls: the input, a's answer, b's answer.
    expect(result.usage.inputTokens).toBe(10 + 20 + 20 + 10 + 3 * 1000);
    expect(span?.attributes['conversation.usage.input_tokens']).toBe(result.usage.inputTokens);
    expect(span?.attributes['conversation.usage.output_tokens']).toBe(result.usage.outputTokens);
    expect(result.usage.outputTokens).toBe(1 + 2 + 2 + 1 + 3);
  });
});

describe('metrics', () => {
  it('count orchestrator_tokens_total exactly by responder, model and type, failed invocations and the turn policy included', async () => {
    const registry = new Registry();
    const telemetry = createConversationTelemetry<number, number>({ registry });
    const runs = Array.from({ length: 20 }, () =>
      orchestrator(
        telemetry,
        [
          reporting('a', [[{ inputTokens: 10, outputTokens: 1, model: 'small' }]]),
          reporting(
            'b',
            [
              [
                { inputTokens: 20, outputTokens: 2, model: 'large' },
                { inputTokens: 5, outputTokens: 5 },
              ],
            ],
            { failOn: 0 },
          ),
        ],
        {
          onResponderError: 'skip',
          termination: maxDispatches(3),
          turnPolicy: turns({ inputTokens: 100, outputTokens: 1, model: 'router' }, true),
        },
      ).run({ sender: 'user', content: 0 }),
    );
    await Promise.all(runs);
    const s = await samples(registry);
    const tokens = [...s]
      .filter(([k]) => k.startsWith('orchestrator_tokens_total{'))
      .sort(([x], [y]) => (x < y ? -1 : 1));
    // Per conversation: the input goes to a (answers) and b (fails after spending, skipped); a's
    // answer to a and b (both answer: the third dispatch ends it). a spends 10/1 (small) twice,
    // b 20/2 (large) and 5/5 (no model) twice, the turn policy 100/1 (router) twice.
    const key = (responder: string, model: string, type: string) =>
      `orchestrator_tokens_total{orchestrator="llm",responder="${responder}",model="${model}",type="${type}"}`;
    expect(Object.fromEntries(tokens)).toEqual({
      [key('a', 'small', 'input')]: 20 * 2 * 10,
      [key('a', 'small', 'output')]: 20 * 2 * 1,
      [key('b', 'large', 'input')]: 20 * 2 * 20,
      [key('b', 'large', 'output')]: 20 * 2 * 2,
      [key('b', '', 'input')]: 20 * 2 * 5,
      [key('b', '', 'output')]: 20 * 2 * 5,
      [key(semconv.TURN_POLICY_LABEL_VALUE, 'router', 'input')]: 20 * 2 * 100,
      [key(semconv.TURN_POLICY_LABEL_VALUE, 'router', 'output')]: 20 * 2 * 1,
    });
  });

  it('observe orchestrator_conversation_tokens per conversation, by reason, with buckets up to millions', async () => {
    const registry = new Registry();
    const telemetry = createConversationTelemetry<number, number>({ registry });
    for (const tokens of [300, 40_000, 2_000_000]) {
      await orchestrator(
        telemetry,
        [reporting('a', [[{ inputTokens: tokens, outputTokens: 0 }]])],
        {
          termination: maxDispatches(1),
        },
      ).run({ sender: 'user', content: 0 });
    }
    const s = await samples(registry);
    for (const [suffix, expected] of [
      ['count{orchestrator="llm",reason="max_dispatches"}', 3],
      ['sum{orchestrator="llm",reason="max_dispatches"}', 2_040_300],
      ['bucket{le="500",orchestrator="llm",reason="max_dispatches"}', 1],
      ['bucket{le="50000",orchestrator="llm",reason="max_dispatches"}', 2],
      ['bucket{le="1000000",orchestrator="llm",reason="max_dispatches"}', 2],
      ['bucket{le="2500000",orchestrator="llm",reason="max_dispatches"}', 3],
      ['bucket{le="10000000",orchestrator="llm",reason="max_dispatches"}', 3],
    ] as const) {
      expect(s.get(`orchestrator_conversation_tokens_${suffix}`), suffix).toBe(expected);
    }
  });

  it.each([
    ['without a sampler', false],
    ['with a sampler that keeps the trace', true],
  ])(
    'put the trace id of a delivered trace on orchestrator_conversation_tokens as an exemplar, %s',
    async (_, sampled) => {
      const registry = openMetricsRegistry();
      const { exporter, provider, tracer } = sampled
        ? sampledDeliveredTracing(registry, { ratio: 1 })
        : deliveredTracing(registry);
      const telemetry = createConversationTelemetry<number, number>({ registry, tracer });
      await orchestrator(telemetry, [reporting('a', [[{ inputTokens: 700, outputTokens: 0 }]])], {
        termination: maxDispatches(1),
      }).run({ sender: 'user', content: 0 });
      await provider.forceFlush();
      const [span] = exporter.getFinishedSpans().filter((x) => x.name === 'invoke_workflow llm');
      const traceId = span?.spanContext().traceId;
      const line = (await registry.metrics())
        .split('\n')
        .find((l) => l.startsWith('orchestrator_conversation_tokens_bucket{le="1000"'));
      expect(line).toMatch(new RegExp(`# \\{trace_id="${traceId}"\\} 700 `));
    },
  );

  it('bound the model label: past maxModels, model="~overflow" with a warning once', async () => {
    const { registry, warnings, telemetry } = cappedTelemetry({ maxModels: 2 });
    const models = ['m1', 'm2', 'm3', 'm4'].map((model) => [
      { inputTokens: 1, outputTokens: 1, model },
    ]);
    await orchestrator(telemetry, [reporting('a', models)]).run({ sender: 'user', content: 0 });
    const s = await samples(registry);
    const input = (model: string) =>
      s.get(
        `orchestrator_tokens_total{orchestrator="llm",responder="a",model="${model}",type="input"}`,
      );
    expect([input('m1'), input('m2'), input(semconv.OVERFLOW_LABEL_VALUE)]).toEqual([1, 1, 2]);
    expect(warnings).toEqual([
      `conversation-orchestrator: more than maxModels (2) distinct models on this registry; tokens of the others are counted under model="${semconv.OVERFLOW_LABEL_VALUE}" (said once)`,
    ]);
  });
});

describe('exact under any mix', () => {
  it('sums orchestrator_tokens_total and orchestrator_conversation_tokens to the conversations’ own totals', async () => {
    const report = fc.record(
      {
        inputTokens: fc.nat({ max: 5000 }),
        outputTokens: fc.nat({ max: 5000 }),
        model: fc.constantFrom('m1', 'm2', 'm3'),
      },
      { requiredKeys: [] },
    );
    // Per responder, its invocations' reports and whether each one then fails (skipped).
    const script = fc.array(
      fc.array(fc.record({ reports: fc.array(report, { maxLength: 3 }), fails: fc.boolean() }), {
        minLength: 1,
        maxLength: 6,
      }),
      { minLength: 1, maxLength: 3 },
    );
    await fc.assert(
      fc.asyncProperty(fc.array(script, { minLength: 1, maxLength: 4 }), async (conversations) => {
        const registry = new Registry();
        const telemetry = createConversationTelemetry<number, number>({ registry });
        let input = 0;
        let output = 0;
        for (const responders of conversations) {
          const result = await orchestrator(
            telemetry,
            responders.map((invocations, r) => {
              let i = 0;
              return {
                name: `r${r}`,
                respond: async (m: Message<number>, _s, context) => {
                  const step = invocations[i++ % invocations.length];
                  for (const usage of step?.reports ?? []) context.reportUsage(usage);
                  await Promise.resolve();
                  if (step?.fails) throw new Error('spent, then failed');
                  return { sender: `r${r}`, content: m.content + 1 };
                },
              };
            }),
            {
              onResponderError: 'skip',
              termination: maxDispatches(8),
              turnPolicy: turns(undefined, true),
            },
          ).run({ sender: 'user', content: 0 });
          input += result.usage.inputTokens;
          output += result.usage.outputTokens;
        }
        const s = await samples(registry);
        const sum = (type: string) =>
          [...s]
            .filter(
              ([k]) => k.startsWith('orchestrator_tokens_total{') && k.includes(`type="${type}"`),
            )
            .reduce((total, [, v]) => total + v, 0);
        expect([sum('input'), sum('output')]).toEqual([input, output]);
        const histogramSum = [...s]
          .filter(([k]) => k.startsWith('orchestrator_conversation_tokens_sum{'))
          .reduce((total, [, v]) => total + v, 0);
        expect(histogramSum).toBe(input + output);
      }),
      { numRuns: 60 },
    );
  });
});

describe('nothing reports usage', () => {
  it('leaves no token series, no usage attribute and no token histogram', async () => {
    const { exporter, tracer } = memoryTracing();
    const registry = new Registry();
    const telemetry = createConversationTelemetry<number, number>({
      tracer,
      registry,
      responderSpans: true,
    });
    await orchestrator(telemetry, [reporting('a', [[]])]).run({ sender: 'user', content: 0 });
    const text = await registry.metrics();
    expect(text).not.toContain('orchestrator_tokens_total{');
    expect(text).not.toContain('orchestrator_conversation_tokens_count{');
    for (const span of exporter.getFinishedSpans()) {
      const keys = [
        ...Object.keys(span.attributes),
        ...span.events.flatMap((e) => Object.keys(e.attributes ?? {})),
      ];
      expect(keys.filter((k) => k.includes('usage') || k.includes('request.model'))).toEqual([]);
    }
  });
});
