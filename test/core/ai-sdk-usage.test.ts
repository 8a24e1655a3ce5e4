/**
 * The AI SDK (`ai` 7.x, its test model from `ai/test`) with the orchestrator: `usageFromAiSdk`
 * turns a call's usage (typed by `ai` 7 itself) into a report, and the spans of the SDK's
 * OpenTelemetry integration (`@ai-sdk/otel`, GenAI conventions) nest under the responder's
 * `invoke_agent` span.
 */
import { OpenTelemetry } from '@ai-sdk/otel';
import { generateText, simulateReadableStream, streamText } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ConversationOrchestrator,
  maxDispatches,
  type Responder,
  roundRobin,
  usageFromAiSdk,
} from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import { memoryTracing, restoreTracing } from '../helpers/tracing.ts';

afterEach(restoreTracing);

/** The AI SDK's test model, answering `text` with the token counts given (undefined: unknown). */
function model(
  modelId: string,
  tokens: { input?: number; cacheRead?: number; output?: number; reasoning?: number },
) {
  return new MockLanguageModelV3({
    provider: 'mock',
    modelId,
    doGenerate: async () => ({
      content: [{ type: 'text', text: 'ok' }],
      finishReason: { unified: 'stop', raw: 'stop' },
      usage: {
        inputTokens: {
          total: tokens.input,
          noCache: undefined,
          cacheRead: tokens.cacheRead,
          cacheWrite: undefined,
        },
        outputTokens: { total: tokens.output, text: undefined, reasoning: tokens.reasoning },
      },
      warnings: [],
    }),
  });
}

/** An agent calling `m` once per turn and reporting what it spent. */
function agent(name: string, m: MockLanguageModelV3): Responder<number, string> {
  return {
    name,
    provider: 'mock',
    respond: async (_message, _state, context) => {
      const result = await generateText({
        model: m,
        prompt: 'go',
        abortSignal: context.signal,
        // Per call here; an app registers it once at start-up (`registerTelemetry`).
        telemetry: { functionId: name, integrations: [new OpenTelemetry()] },
      });
      context.reportUsage(usageFromAiSdk(result.usage, m.modelId));
      return { sender: name, content: result.text };
    },
  };
}

const conversation = (responders: Responder<number, string>[], dispatches: number) =>
  new ConversationOrchestrator<number, string>({
    name: 'llm',
    responders,
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (n) => n + 1 },
    termination: maxDispatches(dispatches),
  });

describe('usageFromAiSdk', () => {
  it('reports what the AI SDK counted: input, output, cache reads, reasoning and the model', async () => {
    const result = await conversation(
      [agent('a', model('small', { input: 180, cacheRead: 20, output: 40, reasoning: 8 }))],
      2,
    ).run({ sender: 'user', content: 'go' });
    expect(result.usage).toEqual({
      inputTokens: 360,
      outputTokens: 80,
      cacheReadInputTokens: 40,
      reasoningOutputTokens: 16,
      byResponder: {
        a: {
          inputTokens: 360,
          outputTokens: 80,
          cacheReadInputTokens: 40,
          reasoningOutputTokens: 16,
        },
      },
    });
  });

  it('leaves out what the provider did not count', async () => {
    const m = model('bare', { output: 5 });
    const { usage } = await generateText({ model: m, prompt: 'go' });
    expect(usageFromAiSdk(usage, 'bare')).toEqual({ model: 'bare', outputTokens: 5 });
    expect(usageFromAiSdk(usage)).toEqual({ outputTokens: 5 });
  });

  it('reads the flat fields of ai 5.x when the details are absent', () => {
    expect(
      usageFromAiSdk({
        inputTokens: 10,
        outputTokens: 2,
        cachedInputTokens: 4,
        reasoningTokens: 1,
      }),
    ).toEqual({
      inputTokens: 10,
      outputTokens: 2,
      cacheReadInputTokens: 4,
      reasoningOutputTokens: 1,
    });
  });

  it('lets reportUsage refuse a count that is not a non-negative integer, naming the field', async () => {
    let thrown: unknown;
    const bad: Responder<number, string> = {
      name: 'bad',
      respond: (_m, _s, context) => {
        try {
          context.reportUsage(usageFromAiSdk({ inputTokens: Number.NaN }));
        } catch (error) {
          thrown = error;
        }
        return undefined;
      },
    };
    await conversation([bad], 1).run({ sender: 'user', content: 'go' });
    expect((thrown as Error).message).toBe(
      'Expected `usage.inputTokens` to be a non-negative integer, got `NaN` (number)',
    );
  });
});

describe('the AI SDK’s OpenTelemetry spans (@ai-sdk/otel)', () => {
  it('nest under the responder’s invoke_agent span, itself under the conversation', async () => {
    const { exporter } = memoryTracing();
    const telemetry = createConversationTelemetry<number, string>({ responderSpans: true });
    const o = new ConversationOrchestrator<number, string>({
      name: 'llm',
      responders: [agent('planner', model('small', { input: 10, output: 2 }))],
      turnPolicy: roundRobin(),
      projection: { initial: () => 0, fold: (n) => n + 1 },
      termination: maxDispatches(2),
      observers: [telemetry],
    });
    await o.run({ sender: 'user', content: 'go' });
    const spans = exporter.getFinishedSpans();
    const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
    /** Each span's name with its ancestors', innermost last. */
    const path = (span: (typeof spans)[number]): string => {
      const parent = byId.get(span.parentSpanContext?.spanId ?? '');
      return parent === undefined ? span.name : `${path(parent)} > ${span.name}`;
    };
    expect(spans.map(path).sort()).toEqual([
      'invoke_workflow llm',
      'invoke_workflow llm > invoke_agent planner',
      'invoke_workflow llm > invoke_agent planner',
      'invoke_workflow llm > invoke_agent planner > invoke_agent small',
      'invoke_workflow llm > invoke_agent planner > invoke_agent small',
      'invoke_workflow llm > invoke_agent planner > invoke_agent small > step 1',
      'invoke_workflow llm > invoke_agent planner > invoke_agent small > step 1',
      'invoke_workflow llm > invoke_agent planner > invoke_agent small > step 1 > chat small',
      'invoke_workflow llm > invoke_agent planner > invoke_agent small > step 1 > chat small',
    ]);
    const traceIds = new Set(spans.map((s) => s.spanContext().traceId));
    expect(traceIds.size).toBe(1);
  });
});

describe('streaming a model’s tokens while a dispatch runs', () => {
  it('hands each token to the app as it comes, then the answer and its usage to the loop', async () => {
    const streaming = new MockLanguageModelV3({
      provider: 'mock',
      modelId: 'streamer',
      doStream: async () => ({
        stream: simulateReadableStream({
          chunks: [
            { type: 'text-start' as const, id: 't' },
            ...['Cache ', 'for ', '5 s.'].map((delta) => ({
              type: 'text-delta' as const,
              id: 't',
              delta,
            })),
            { type: 'text-end' as const, id: 't' },
            {
              type: 'finish' as const,
              finishReason: { unified: 'stop' as const, raw: 'stop' },
              usage: {
                inputTokens: {
                  total: 12,
                  noCache: 12,
                  cacheRead: undefined,
                  cacheWrite: undefined,
                },
                outputTokens: { total: 3, text: 3, reasoning: undefined },
              },
            },
          ],
        }),
      }),
    });
    // What a page or a log would show: each token as it comes, then each finished dispatch.
    const seen: string[] = [];
    const writer: Responder<string, string> = {
      name: 'writer',
      respond: async (_message, _state, context) => {
        const result = streamText({ model: streaming, prompt: 'go', abortSignal: context.signal });
        for await (const token of result.textStream) seen.push(`token ${token}`);
        context.reportUsage(usageFromAiSdk(await result.usage, 'streamer'));
        return { sender: 'writer', content: await result.text };
      },
    };
    const o = new ConversationOrchestrator<string, string>({
      name: 'stream',
      responders: [writer],
      turnPolicy: roundRobin(),
      projection: { initial: () => '', fold: (_s, m) => m.content },
      termination: maxDispatches(1),
      listener: (state, _d, n) => seen.push(`dispatch ${n}: ${state.projection}`),
    });
    const result = await o.run({ sender: 'user', content: 'go' });
    expect(seen).toEqual([
      'token Cache ',
      'token for ',
      'token 5 s.',
      'dispatch 1: Cache for 5 s.',
    ]);
    expect(result.usage.byResponder.writer).toEqual({ inputTokens: 12, outputTokens: 3 });
  });
});
