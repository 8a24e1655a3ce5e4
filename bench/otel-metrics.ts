/**
 * Issue 42: the telemetry's metrics through the OpenTelemetry metrics API against the same
 * metrics on a prom-client registry, per dispatch, side by side in one process. Workload: three
 * async desks in round robin (trivial responders, `npm run bench`'s), 10,000-dispatch
 * conversations. Every round runs each variant once, the order rotating; an OpenTelemetry
 * variant's round ends with one collection of its MeterProvider (what a periodic reader does
 * every 60 s), timed with it, and a prom-client one with a scrape. Ratios are the median of each
 * round's own ratio to "prom-client alone". Two regimes: no tracer provider (metrics only: the
 * cheapest dispatch, so the hardest ratio) and an SDK tracer writing the span events.
 */
import { performance } from 'node:perf_hooks';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import {
  BatchSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { Registry } from 'prom-client';
import {
  type ConversationObserver,
  type ConversationOrchestrator,
  maxDispatches,
} from '../src/index.ts';
import { createConversationTelemetry } from '../src/observability/index.ts';
import { type Desks, orchestrator } from './desks.ts';

const LENGTH = 10_000;

class ManualReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

class DroppingExporter implements SpanExporter {
  export(_spans: ReadableSpan[], done: (r: { code: 0 }) => void): void {
    done({ code: 0 });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

function desksOf(observers: ConversationObserver<Desks, number>[]) {
  return orchestrator({ async: true, observers, termination: maxDispatches(LENGTH) });
}

interface Variant {
  readonly label: string;
  readonly run: ConversationOrchestrator<Desks, number>;
  /** What the variant's sinks do once per round: a collection, a scrape. */
  readonly collect: () => Promise<unknown>;
}

function variant(
  label: string,
  regime: 'metrics' | 'spans',
  sinks: { registry?: boolean; otel?: boolean; genAi?: boolean; telemetry?: boolean },
): Variant {
  const registry = sinks.registry === true ? new Registry() : undefined;
  const reader = sinks.otel === true ? new ManualReader() : undefined;
  const meterProvider = reader === undefined ? undefined : new MeterProvider({ readers: [reader] });
  const tracerProvider =
    regime === 'spans'
      ? new TracerProvider({
          spanProcessors: [new BatchSpanProcessor({ exporter: new DroppingExporter() })],
        })
      : undefined;
  const observers =
    sinks.telemetry === false
      ? []
      : [
          createConversationTelemetry<Desks, number>({
            ...(registry === undefined ? {} : { registry }),
            ...(meterProvider === undefined ? {} : { meterProvider }),
            ...(sinks.genAi === false ? { genAiMetrics: false } : {}),
            ...(tracerProvider === undefined ? {} : { tracerProvider }),
          }),
        ];
  return {
    label,
    run: desksOf(observers),
    collect: async () => {
      await reader?.collect();
      await registry?.metrics();
    },
  };
}

function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

async function timeRound(v: Variant, dispatches: number): Promise<number> {
  const t0 = process.env.BENCH_CLOCK === 'wall' ? performance.now() : cpuMs();
  let done = 0;
  while (done < dispatches) {
    const result = await v.run.run({ sender: 'user', content: 0 });
    done += result.dispatchCount;
  }
  await v.collect();
  const t1 = process.env.BENCH_CLOCK === 'wall' ? performance.now() : cpuMs();
  return ((t1 - t0) * 1e6) / done;
}

const median = (xs: readonly number[]) =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

async function table(regime: 'metrics' | 'spans', rounds: number, dispatches: number) {
  const variants = [
    variant('prom-client alone (registry)', regime, { registry: true }),
    variant('OpenTelemetry alone (meterProvider, GenAI metrics on)', regime, { otel: true }),
    variant('OpenTelemetry alone, genAiMetrics: false', regime, { otel: true, genAi: false }),
    variant('both (registry + meterProvider)', regime, { registry: true, otel: true }),
    variant('telemetry without metrics (both off)', regime, {}),
    variant('no telemetry', regime, { telemetry: false }),
  ];
  for (const v of variants) await timeRound(v, dispatches / 5); // warm-up
  const ns = variants.map(() => [] as number[]);
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < variants.length; k++) {
      const i = (k + round) % variants.length;
      (globalThis as { gc?: () => void }).gc?.();
      ns[i]?.push(await timeRound(variants[i] as Variant, dispatches));
    }
  }
  const base = ns[0] as number[];
  const title =
    regime === 'metrics'
      ? 'no tracer provider (metrics only)'
      : 'SDK tracer, span events (BatchSpanProcessor, dropping exporter)';
  console.log(
    `\n### Metrics through OpenTelemetry against prom-client, ${title}, async desks, ${LENGTH.toLocaleString('en')}-dispatch conversations (ns / dispatch)\n`,
  );
  console.log('| variant | ns / dispatch | × prom-client alone |');
  console.log('|---|---:|---:|');
  for (const [i, v] of variants.entries()) {
    const own = ns[i] as number[];
    const ratio = median(own.map((x, r) => x / (base[r] as number)));
    console.log(`| ${v.label} | ${median(own).toFixed(0)} | ${ratio.toFixed(2)} |`);
  }
}

/** Prints both regimes' tables. */
export async function otelMetricsTable(rounds: number, dispatches: number): Promise<void> {
  await table('metrics', rounds, dispatches);
  await table('spans', rounds, dispatches);
}
