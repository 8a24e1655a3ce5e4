/**
 * A durable conversation's ending decides its trace where the conversation ends (finding 19):
 * `cancel()` of a suspended conversation ends it as `aborted`, a kept reason, although a handoff
 * (an abort that leaves the conversation resumable) ends a segment with the same reason. The
 * core says which (`ConversationEnd.ended`); the telemetry writes it on the span
 * (`conversation.ended`) and the sampler reads it. A cancel is counted once, as that ending, and
 * never as a resume (finding 9).
 */
import { context } from '@opentelemetry/api';
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
  type ConversationObserver,
  ConversationOrchestrator,
  type ConversationStore,
  createMemoryStore,
  maxDispatches,
  roundRobin,
  suspend,
} from '../../src/index.ts';
import {
  createConversationSampler,
  createConversationTelemetry,
} from '../../src/observability/index.ts';
import { counter, plusOne } from '../helpers/counter.ts';
import { restoreTracing } from '../helpers/tracing.ts';

afterEach(restoreTracing);

/** `b` suspends on message 3 (once); otherwise each step adds 1, up to `steps` dispatches. */
function orchestrator(
  store: ConversationStore,
  observers: ConversationObserver<number, number>[],
  onStep?: (n: number) => void,
) {
  return new ConversationOrchestrator<number, number>(
    counter('cancels', {
      store,
      observers,
      step: (_who, m) => {
        onStep?.(m.content + 1);
        return plusOne(m);
      },
    }),
  );
}

/** A sampler dropping by ratio (0) in front of a memory exporter, with its metrics. */
function sampled() {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const exporter = new InMemorySpanExporter();
  const registry = new Registry();
  const sampler = createConversationSampler({
    next: new SimpleSpanProcessor({ exporter }),
    registry,
    ratio: 0,
  });
  const provider = new TracerProvider({ spanProcessors: [sampler] });
  const telemetry = createConversationTelemetry({ tracerProvider: provider, registry });
  return { exporter, registry, provider, telemetry };
}

function decisions(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of text.matchAll(
    /^orchestrator_sampler_decisions_total\{decision="(\w+)",rule="(\w+)"\} (\d+)$/gm,
  )) {
    if (m[3] !== '0') out[`${m[1]}/${m[2]}`] = Number(m[3]);
  }
  return out;
}

function conversationSpans(exporter: InMemorySpanExporter): ReadableSpan[] {
  return exporter.getFinishedSpans().filter((s) => s.name === 'invoke_workflow cancels');
}

describe('cancel() of a suspended durable conversation, sampled at ratio 0', () => {
  it("keeps the cancel's segment by the reason rule (aborted is kept): its end is the conversation's", async () => {
    const { exporter, registry, provider, telemetry } = sampled();
    const store = createMemoryStore();
    const o = orchestrator(store, [telemetry]);
    const suspended = await o.run({ sender: 'user', content: 0 }, { conversationId: 's1' });
    expect(suspended.suspended).toBeDefined();
    expect(await o.cancel('s1', { reason: 'the person left' })).toBe(true);
    await provider.forceFlush();

    // The suspension ended no conversation: the ratio dropped it. The cancel ended it: kept.
    expect(decisions(await registry.metrics())).toEqual({ 'drop/ratio': 1, 'keep/reason': 1 });
    const spans = conversationSpans(exporter);
    expect(spans.map((s) => s.attributes)).toMatchObject([
      {
        'conversation.segment': 2,
        'conversation.end.reason': 'aborted',
        'conversation.ended': true,
        'conversation.sampler.rule': 'reason',
      },
    ]);
    await provider.shutdown();
  });

  it('writes conversation.ended false on the suspended segment, true on the ending one', async () => {
    const exporter = new InMemorySpanExporter();
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    const provider = new TracerProvider({
      spanProcessors: [new SimpleSpanProcessor({ exporter })],
    });
    const o = orchestrator(createMemoryStore(), [
      createConversationTelemetry({ tracerProvider: provider }),
    ]);
    await o.run({ sender: 'user', content: 0 }, { conversationId: 's2' });
    await o.cancel('s2');
    expect(
      conversationSpans(exporter).map((s) => [
        s.attributes['conversation.end.reason'],
        s.attributes['conversation.ended'],
      ]),
    ).toEqual([
      ['suspended', false],
      ['aborted', true],
    ]);
    await provider.shutdown();
  });

  it('counts the cancelled conversation once, as an aborted ending, and not as a resume', async () => {
    const { registry, provider, telemetry } = sampled();
    const o = orchestrator(createMemoryStore(), [telemetry]);
    await o.run({ sender: 'user', content: 0 }, { conversationId: 's3' });
    await o.cancel('s3');
    const text = await registry.metrics();
    expect(text).toContain('orchestrator_conversations_started_total{orchestrator="cancels"} 1');
    // Every reason's series starts at 0: the non-zero ones are the endings counted.
    const ended = [
      ...text.matchAll(/^orchestrator_conversations_ended_total\{[^}]*\} [1-9]\d*$/gm),
    ];
    expect(ended.map((m) => m[0])).toEqual([
      'orchestrator_conversations_ended_total{orchestrator="cancels",reason="aborted"} 1',
    ]);
    expect(text).not.toMatch(/^orchestrator_conversations_resumed_total\{/m);
    expect(text).toMatch(/^orchestrator_conversations_in_progress\{orchestrator="cancels"\} 0$/m);
    await provider.shutdown();
  });
});

describe('a handoff (an abort that leaves the conversation resumable), sampled at ratio 0', () => {
  it('judges the aborted segment without the reason rule, and its resumed ending by all rules', async () => {
    const { exporter, registry, provider, telemetry } = sampled();
    const controller = new AbortController();
    const o = orchestrator(createMemoryStore(), [telemetry], (n) => {
      if (n === 2) controller.abort();
    });
    await expect(
      o.run({ sender: 'user', content: 0 }, { conversationId: 'h1', signal: controller.signal }),
    ).rejects.toMatchObject({ reason: 'aborted' });
    // Handed off, not ended: the ratio decides (drop).
    expect(decisions(await registry.metrics())).toEqual({ 'drop/ratio': 1 });
    expect(await o.cancel('h1')).toBe(true);
    await provider.forceFlush();
    expect(decisions(await registry.metrics())).toEqual({ 'drop/ratio': 1, 'keep/reason': 1 });
    expect(
      conversationSpans(exporter).map((s) => [
        s.attributes['conversation.segment'],
        s.attributes['conversation.ended'],
      ]),
    ).toEqual([[2, true]]);
    await provider.shutdown();
  });
});

describe('a suspension without a store, sampled at ratio 0', () => {
  it('is no ending either (conversation.ended false): the ratio drops it, the reason rule does not keep it', async () => {
    const { exporter, registry, provider, telemetry } = sampled();
    const o = new ConversationOrchestrator<number, number>({
      name: 'cancels',
      observers: [telemetry],
      responders: [{ name: 'a', respond: () => suspend('ok?') }],
      turnPolicy: roundRobin(),
      projection: { initial: () => 0, fold: (_n, m) => m.content },
      termination: maxDispatches(3),
    });
    expect((await o.run({ sender: 'user', content: 0 })).suspended).toBeDefined();
    await provider.forceFlush();
    expect(decisions(await registry.metrics())).toEqual({ 'drop/ratio': 1 });
    expect(conversationSpans(exporter)).toEqual([]);
    await provider.shutdown();
  });
});
