/**
 * Tail sampling: keep every trace worth looking at (failed, not converged, slow) and a small,
 * deterministic share of the rest, decided when each conversation ends. Spans go to an in-memory
 * exporter here so the program can say what was kept; in a service, wrap the
 * `BatchSpanProcessor` around your OTLP exporter instead.
 *
 *   npx tsx examples/tail-sampling/main.ts
 */
import { BatchSpanProcessor, InMemorySpanExporter, TracerProvider } from '@opentelemetry/sdk-trace';
import {
  anyOf,
  ConversationOrchestrator,
  converged,
  maxDispatches,
  type Responder,
  roundRobin,
} from 'conversation-orchestrator';
import {
  createConversationSampler,
  createConversationTelemetry,
  semconv,
} from 'conversation-orchestrator/observability';
import { Registry } from 'prom-client';

const exporter = new InMemorySpanExporter();
const registry = new Registry();
const sampler = createConversationSampler({
  next: new BatchSpanProcessor({ exporter: exporter }), // what exports, as it would without a sampler
  registry, // the decisions are counted here, and exemplars point only at kept traces
  ratio: 0, // none of the conversations that went well (in production: 0.05, say)
});
const provider = new TracerProvider({ spanProcessors: [sampler] });
const telemetry = createConversationTelemetry<number, number>({
  registry,
  tracerProvider: provider,
  responderSpans: true, // child spans too: they are kept or dropped with their conversation
});

/** Two desks halving their gap; `broken` fails on its 5th quote. */
const desk = (name: string, broken: boolean): Responder<number, number> => {
  let quotes = 0;
  return {
    name,
    respond: (message) => {
      if (broken && ++quotes === 5) throw new Error('price feed down');
      return { sender: name, content: message.content / 2 };
    },
  };
};
const orchestrator = (name: string, broken = false, cap = 1_000) =>
  new ConversationOrchestrator<number, number>({
    name,
    responders: [desk('london', broken), desk('tokyo', false)],
    turnPolicy: roundRobin(),
    projection: { initial: (input) => input.content, fold: (_gap, message) => message.content },
    termination: anyOf(
      converged({ measure: (s) => s.projection, tolerance: 0.01 }),
      maxDispatches(cap),
    ),
    observers: [telemetry],
  });

// Eight conversations that converge, one that hits its dispatch cap, one whose feed fails.
for (let i = 0; i < 8; i++)
  await orchestrator('calm_desks').run({ sender: 'market', content: 100 });
await orchestrator('capped_desks', false, 4).run({ sender: 'market', content: 100 });
await orchestrator('broken_desks', true)
  .run({ sender: 'market', content: 100 })
  .catch(() => {});
await provider.forceFlush();

const kept = exporter.getFinishedSpans().filter((s) => s.name.startsWith('invoke_workflow '));
for (const span of kept) {
  console.log(
    `kept ${span.name}: ${span.attributes[semconv.ATTR_CONVERSATION_END_REASON]} ` +
      `(rule ${span.attributes[semconv.ATTR_CONVERSATION_SAMPLER_RULE]})`,
  );
}
console.log(`spans exported: ${exporter.getFinishedSpans().length}`);
const decisions = await registry.getSingleMetricAsString(semconv.METRIC_SAMPLER_DECISIONS);
// The decisions that happened (every rule's series exists from the start, at 0).
for (const line of decisions
  .split('\n')
  .filter((l) => /^orchestrator_sampler.* [1-9]\d*$/.test(l))) {
  console.log(line);
}
await provider.shutdown();
