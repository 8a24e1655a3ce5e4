/**
 * LLM agents with the Vercel AI SDK: two agents that call a model, report what each call spent
 * with `context.reportUsage(usageFromAiSdk(...))`, a turn policy that asks a third model who
 * speaks next, and a token budget that stops a conversation running away. The AI SDK's own
 * spans (its OpenTelemetry integration, `@ai-sdk/otel`) nest under each agent's `invoke_agent`
 * span in the conversation's trace. The models are the AI SDK's test model (`MockLanguageModelV3` from
 * `ai/test`) with scripted answers, so nothing leaves the machine: put `openai('gpt-4.1-mini')`
 * or any other AI SDK model in their place.
 *
 *   npx tsx examples/llm-agents/main.ts
 */

import { OpenTelemetry } from '@ai-sdk/otel';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { generateText, type LanguageModel, registerTelemetry } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import {
  anyOf,
  ConversationOrchestrator,
  maxDispatches,
  type Responder,
  stopWhen,
  tokenBudget,
  usageFromAiSdk,
} from 'conversation-orchestrator';
import { createConversationTelemetry } from 'conversation-orchestrator/observability';

// Tracing as an app sets it up (sdk-node does the same with an OTLP exporter); spans go to memory
// here so the example can print the trace's shape.
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const spans = new InMemorySpanExporter();
trace.setGlobalTracerProvider(
  new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: spans })] }),
);
// AI SDK 7 writes spans through a registered integration, once at start-up, for every call.
registerTelemetry(new OpenTelemetry());

/** A scripted model: answers `replies` in turn, each call spending the tokens given. */
function scriptedModel(
  modelId: string,
  replies: readonly string[],
  tokens: { input: number; output: number },
) {
  let call = 0;
  return new MockLanguageModelV3({
    provider: 'mock',
    modelId,
    doGenerate: async () => ({
      content: [{ type: 'text', text: replies[call++ % replies.length] as string }],
      finishReason: { unified: 'stop', raw: 'stop' },
      usage: {
        inputTokens: {
          total: tokens.input,
          noCache: tokens.input - 20,
          cacheRead: 20,
          cacheWrite: 0,
        },
        outputTokens: { total: tokens.output, text: tokens.output, reasoning: 0 },
      },
      warnings: [],
    }),
  });
}

/** The conversation keeps a short transcript: the last few turns, enough for the next prompt. */
interface Transcript {
  readonly turns: readonly string[];
}

/** An agent: one model call per turn, with the transcript as its prompt. */
function agent(
  name: string,
  model: LanguageModel & { modelId: string },
  role: string,
): Responder<Transcript, string> {
  return {
    name,
    provider: 'mock',
    respond: async (_message, state, context) => {
      const result = await generateText({
        model,
        system: `You are ${name}, ${role}. Say AGREED once the plan is sound.`,
        prompt: state.projection.turns.join('\n'),
        abortSignal: context.signal,
        // The AI SDK's spans: the call runs in the invoke_agent span's context, so they nest.
        telemetry: { functionId: name },
      });
      // Input, output, cache reads and reasoning, as far as the provider counted them.
      context.reportUsage(usageFromAiSdk(result.usage, model.modelId));
      return { sender: name, content: result.text };
    },
  };
}

const planner = scriptedModel(
  'planner-small',
  [
    'Plan: cache the price feed and retry twice.',
    'Revised: cache for 5 s, retry twice with backoff.',
    'AGREED: cache 5 s, two retries with backoff, alert after a minute stale.',
  ],
  { input: 180, output: 40 },
);
const reviewer = scriptedModel(
  'reviewer-small',
  [
    'Retries without backoff will hammer the venue.',
    'Better. What if the feed is stale for minutes?',
  ],
  { input: 200, output: 30 },
);
// The moderator is asked who speaks next and answers with a name.
const moderator = scriptedModel('moderator-tiny', ['planner', 'reviewer'], {
  input: 60,
  output: 2,
});

const orchestrator = new ConversationOrchestrator<Transcript, string>({
  name: 'design_review',
  responders: [
    agent('planner', planner, 'who proposes a plan'),
    agent('reviewer', reviewer, 'who finds its weak points'),
  ],
  // A turn policy that asks a model; what that call spends is reported too (usage.turnPolicy).
  turnPolicy: async (message, _state, responders, context) => {
    const result = await generateText({
      model: moderator,
      prompt: `Last: ${message.sender}: ${message.content}\nWho speaks next: ${responders.map((r) => r.name).join(' or ')}?`,
      abortSignal: context.signal,
      telemetry: { functionId: 'moderator' },
    });
    context.reportUsage(usageFromAiSdk(result.usage, moderator.modelId));
    const next = result.text.trim();
    return responders.filter((r) => r.name === next);
  },
  projection: {
    initial: (input) => ({ turns: [`user: ${input.content}`] }),
    fold: (transcript, message) => ({
      turns: [...transcript.turns, `${message.sender}: ${message.content}`].slice(-6),
    }),
  },
  termination: anyOf(
    stopWhen((state) => state.lastMessage.content.startsWith('AGREED'), 'agreed'),
    tokenBudget({ total: 5_000 }), // a runaway conversation stops here, reason `token_budget`
    maxDispatches(20),
  ),
  // A span per conversation and one per agent call (invoke_agent), with the usage on them.
  observers: [createConversationTelemetry<Transcript, string>({ responderSpans: true })],
});

const result = await orchestrator.run({
  sender: 'user',
  content: 'Design how the desks survive a flaky price feed.',
});
console.log(`${result.decision.reason} after ${result.dispatchCount} dispatches`);
console.log(result.state.projection.turns.at(-1));
const { inputTokens, outputTokens, byResponder, turnPolicy } = result.usage;
console.log(`tokens: ${inputTokens} in, ${outputTokens} out`);
for (const [name, totals] of Object.entries(byResponder)) {
  console.log(`  ${name}: ${totals.inputTokens} in, ${totals.outputTokens} out`);
}
console.log(`  turn policy: ${turnPolicy?.inputTokens} in, ${turnPolicy?.outputTokens} out`);

// The trace's shape: each distinct path of span names, with how many spans took it. The
// AI SDK spans right under invoke_workflow are the moderator's (the turn policy's).
const byId = new Map(spans.getFinishedSpans().map((span) => [span.spanContext().spanId, span]));
const path = (span: ReadableSpan): string[] => {
  const parent = byId.get(span.parentSpanContext?.spanId ?? '');
  return [...(parent === undefined ? [] : path(parent)), span.name];
};
const paths = new Map<string, number>();
for (const span of byId.values()) {
  const key = path(span).join(' > ');
  paths.set(key, (paths.get(key) ?? 0) + 1);
}
console.log('trace:');
for (const [key, count] of [...paths].sort(([a], [b]) => a.localeCompare(b))) {
  const names = key.split(' > ');
  console.log(`${'  '.repeat(names.length - 1)}${names.at(-1)} x${count}`);
}
