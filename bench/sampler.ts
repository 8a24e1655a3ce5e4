/**
 * The conversation sampler's cost per span against the plain `BatchSpanProcessor` it wraps.
 * Conversations are built as the telemetry builds them (an `invoke_workflow` span with its end
 * attributes) with `CHILDREN` spans ending inside each, through one SDK tracer per variant; every
 * variant exports to an exporter that drops what it gets. Variants alternate within each round,
 * so each sees the same neighbours' load; the table shows medians.
 */
import { context, type Span, SpanKind, type Tracer, trace } from '@opentelemetry/api';
import {
  BatchSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
  type SpanProcessor,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { createConversationSampler, semconv } from '../src/observability/index.ts';

const CHILDREN = 9;
const CONVERSATIONS = 2_000;

/** An exporter that drops what it is given (counting it): the SDK pipeline runs, nothing leaves the process. */
export class CountingExporter implements SpanExporter {
  spans = 0;
  export(spans: ReadableSpan[], done: (r: { code: 0 }) => void): void {
    this.spans += spans.length;
    done({ code: 0 });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

interface Variant {
  readonly name: string;
  readonly tracer: Tracer;
  readonly exporter: CountingExporter;
  readonly processor: SpanProcessor;
}

function variant(name: string, wrap?: (next: SpanProcessor) => SpanProcessor): Variant {
  const exporter = new CountingExporter();
  // A queue that holds a round: the plain processor must not win by dropping spans.
  const batch = new BatchSpanProcessor({ exporter, maxQueueSize: 100_000 });
  const processor = wrap === undefined ? batch : wrap(batch);
  const provider = new TracerProvider({ spanProcessors: [processor] });
  return { name, tracer: provider.getTracer('bench'), exporter, processor };
}

/** One conversation: `invoke_workflow` with children, ended converged (the ratio decides). */
function conversation(tracer: Tracer): void {
  const span: Span = tracer.startSpan(`${semconv.SPAN_CONVERSATION_PREFIX}bench`, {
    kind: SpanKind.INTERNAL,
    attributes: { [semconv.ATTR_GEN_AI_OPERATION_NAME]: semconv.GEN_AI_OPERATION_INVOKE_WORKFLOW },
  });
  const parent = trace.setSpan(context.active(), span);
  for (let i = 0; i < CHILDREN; i++) tracer.startSpan('llm.call', {}, parent).end();
  span.setAttributes({
    [semconv.ATTR_CONVERSATION_DISPATCH_COUNT]: 10,
    [semconv.ATTR_CONVERSATION_END_REASON]: 'converged',
    [semconv.ATTR_CONVERSATION_ELAPSED_MS]: 1.5,
  });
  span.end();
}

async function timeRound(v: Variant, clock: () => number): Promise<number> {
  const t0 = clock();
  for (let i = 0; i < CONVERSATIONS; i++) conversation(v.tracer);
  await v.processor.forceFlush();
  return ((clock() - t0) * 1e6) / (CONVERSATIONS * (CHILDREN + 1));
}

/** Prints the sampler's table: ns per span, medians of `rounds`. */
export async function samplerTable(rounds: number, clock: () => number): Promise<void> {
  const variants = [
    variant('BatchSpanProcessor (every span exported)'),
    variant('sampler, ratio 0.1 (converged: 9 in 10 traces dropped)', (next) =>
      createConversationSampler({ next, ratio: 0.1 }),
    ),
    variant('sampler, ratio 1 (every trace buffered, then exported)', (next) =>
      createConversationSampler({ next, ratio: 1 }),
    ),
  ];
  const ns = variants.map(() => [] as number[]);
  for (const v of variants) await timeRound(v, clock); // warm-up
  for (let round = 0; round < rounds; round++) {
    for (const [i, v] of variants.entries()) ns[i]?.push(await timeRound(v, clock));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
  const plain = median(ns[0] ?? []);
  console.log(
    `\n### The conversation sampler per span, ${CHILDREN + 1}-span conversations (ns / span, the SDK span included)\n`,
  );
  console.log('| processor | ns / span | × BatchSpanProcessor | spans exported |');
  console.log('|---|---:|---:|---:|');
  for (const [i, v] of variants.entries()) {
    const m = median(ns[i] ?? []);
    console.log(
      `| ${v.name} | ${m.toFixed(0)} | ${(m / plain).toFixed(2)} | ${v.exporter.spans.toLocaleString('en')} |`,
    );
  }
}
