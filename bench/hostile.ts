/**
 * The hostile inputs of issue 18, timed through the public API (docs/performance.md, "Hostile
 * input"): `node --import tsx bench/hostile.ts`. To compare with another revision, copy this file
 * into a checkout of it and run it there.
 */
import { SimpleSpanProcessor, type SpanExporter, TracerProvider } from '@opentelemetry/sdk-trace';
import { Registry } from 'prom-client';
import { ConversationOrchestrator, maxDispatches, roundRobin } from '../src/index.ts';
import {
  type ConversationTelemetry,
  createConversationTelemetry,
} from '../src/observability/index.ts';

const drop: SpanExporter = {
  export: (_spans, done) => done({ code: 0 }),
  shutdown: async () => {},
};
const tracer = new TracerProvider({
  spanProcessors: [new SimpleSpanProcessor({ exporter: drop })],
}).getTracer('hostile');
const quiet = { warn() {}, error() {}, info() {}, debug() {}, verbose() {} };

function conversation(
  telemetry: ConversationTelemetry<number, unknown>,
  dispatches: number,
  content: () => unknown,
  name = 'hostile',
) {
  return new ConversationOrchestrator<number, unknown>({
    name,
    responders: [{ name: 'a', respond: () => ({ sender: 'a', content: content() }) }],
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (s) => s + 1 },
    termination: maxDispatches(dispatches),
    observers: [telemetry],
  });
}

{
  const many = Object.fromEntries(Array.from({ length: 30_000 }, (_, i) => [`k${i}`, i]));
  const telemetry = createConversationTelemetry<number, unknown>({
    tracer,
    stateAttributes: () => many,
    logger: quiet,
  });
  const rss = process.memoryUsage().rss;
  const started = performance.now();
  await conversation(telemetry, 200, () => 1).run({ sender: 'u', content: 0 });
  console.log(
    `30,000-key stateAttributes, 200 dispatches: ${(performance.now() - started).toFixed(0)} ms, +${((process.memoryUsage().rss - rss) / 1e6).toFixed(0)} MB RSS`,
  );
}
{
  const big = { rows: Array.from({ length: 300_000 }, (_, i) => ({ id: i, name: `row ${i}` })) };
  const telemetry = createConversationTelemetry<number, unknown>({
    tracer,
    captureContent: true,
    logger: quiet,
  });
  const started = performance.now();
  await conversation(telemetry, 200, () => big).run({ sender: 'u', content: 0 });
  console.log(
    `${(JSON.stringify(big).length / 1e6).toFixed(1)} MB content, captureContent: ${((performance.now() - started) / 200).toFixed(2)} ms per dispatch`,
  );
}
{
  const registry = new Registry();
  const telemetry = createConversationTelemetry<number, unknown>({ registry, logger: quiet });
  for (let i = 0; i < 10_000; i++) {
    await conversation(telemetry, 1, () => 1, `tenant_${i}`).run({ sender: 'u', content: 0 });
  }
  const started = performance.now();
  const text = await registry.metrics();
  const lines = text.split('\n').filter((l) => l !== '' && !l.startsWith('#')).length;
  console.log(
    `10,000 tenants: /metrics ${(text.length / 1e6).toFixed(2)} MB, ${lines} series lines, scrape ${(performance.now() - started).toFixed(0)} ms`,
  );
}
