/**
 * `npm run bench`: the hot path side by side in one process, median of several rounds.
 *
 * Workload: three trading desks in round robin, each moving 1% of the way toward its peers' mean
 * quote (trivial responders), ending when the spread is within 1e-9 or at a dispatch cap.
 * Conversations are long (10,000 dispatches) so per-conversation costs are amortised the way they
 * are for fast agents; a separate line measures short (50-dispatch) conversations.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { spawnSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { context, type Span, SpanKind, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BatchSpanProcessor, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { Counter, Histogram, type OpenMetricsContentType, Registry } from 'prom-client';
import {
  anyOf,
  type ConversationObserver,
  ConversationOrchestrator,
  type ConversationState,
  converged,
  type Message,
  maxDispatches,
  type Responder,
  roundRobin,
} from '../src/index.ts';
import { createConversationTelemetry } from '../src/observability/index.ts';
import { type Desks, desks, INDEX, LONG, orchestrator, spreadOf } from './desks.ts';
import { durableTable } from './durable.ts';
import { fanoutTable } from './fanout.ts';
import { fleetTables } from './fleet.ts';
import { sdkFloor } from './floor.ts';
import { langgraphTable, langgraphTranscriptTable } from './langgraph.ts';
import { networkStoresTable } from './network-stores.ts';
import { otelMetricsTable } from './otel-metrics.ts';
import { CountingExporter, samplerTable } from './sampler.ts';
import { storesTables } from './stores.ts';
import { bigTranscriptChild, transcriptTable } from './transcript.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15);
const DISPATCHES_PER_ROUND = Number(process.env.BENCH_DISPATCHES ?? 150_000);
/** The floor comparison is issue 10's target: more rounds, for steadier medians on a noisy machine. */
const FLOOR_ROUNDS = Number(process.env.BENCH_FLOOR_ROUNDS ?? 25);
/** Turns per round in the floor comparison (see floorTable). */
const SLICES = 10;
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});

/**
 * The bench's clock, in milliseconds. By default the process's CPU time (user + system, all its
 * threads, so GC helper threads count): this machine is shared by several busy agents, and wall
 * time there mostly measures how long the neighbours kept the process off a core. The workload
 * waits for nothing (no I/O, no timers), so on an idle machine the two agree.
 * `BENCH_CLOCK=wall` measures wall time instead.
 */
const WALL = process.env.BENCH_CLOCK === 'wall';
function clock(): number {
  if (WALL) return performance.now();
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/**
 * A tracer whose spans go to an exporter that drops them. `batch` (the default, as applications
 * run): a BatchSpanProcessor, which holds up to 512 ended spans before it exports them. The floor
 * comparison uses a SimpleSpanProcessor instead: each span is handed to the exporter as it ends,
 * so no variant's garbage collections are made longer by spans that other variants left in a
 * queue (with 100-dispatch conversations, collecting those spans was most of the round-to-round
 * spread).
 */
function sdkTracer(processor: 'batch' | 'simple' = 'batch') {
  const exporter = new CountingExporter();
  const provider = new TracerProvider({
    spanProcessors: [
      processor === 'batch'
        ? new BatchSpanProcessor({ exporter: exporter })
        : new SimpleSpanProcessor({ exporter: exporter }),
    ],
  });
  return provider.getTracer('bench');
}

/** The naive plugin: addEvent, inc and observe on every dispatch. */
function naiveObserver(registry: Registry): ConversationObserver<Desks, number> {
  const tracer = sdkTracer();
  const dispatches = new Counter({
    name: 'naive_dispatches_total',
    help: 'x',
    labelNames: ['orchestrator', 'responder'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'naive_dispatch_duration_seconds',
    help: 'x',
    labelNames: ['orchestrator', 'responder'],
    registers: [registry],
  });
  return {
    startConversation(start) {
      const span: Span = tracer.startSpan(`invoke_workflow ${start.orchestrator}`, {
        kind: SpanKind.INTERNAL,
      });
      return {
        onDispatch(info) {
          const responder = start.responders[info.responderIndex] as string;
          span.addEvent('conversation.dispatch', {
            'conversation.dispatch.count': info.dispatchCount,
            'gen_ai.agent.name': responder,
            'conversation.decision.reason': info.decision.reason,
          });
          dispatches.inc({ orchestrator: start.orchestrator, responder });
          duration.observe({ orchestrator: start.orchestrator, responder }, info.durationMs / 1000);
        },
        onConversationEnd() {
          span.end();
        },
      };
    },
  };
}

function openMetricsRegistry(): Registry<OpenMetricsContentType> {
  const registry = new Registry() as unknown as Registry<OpenMetricsContentType>;
  registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
  return registry;
}

interface Variant {
  readonly label: string;
  /** Runs conversations for about `dispatches` dispatches; answers ns per dispatch. */
  readonly time: (dispatches: number) => Promise<number>;
}

/**
 * The floor: the same desks, fold and termination check in a hand-written awaited loop, with no
 * orchestrator around them. On the machine of DESIGN.md §6 such a loop cost ~150 ns.
 */
function bareLoop(async: boolean, length: number): Variant['time'] {
  const responders = desks(async);
  const termination = anyOf(
    converged<Desks, number>({ measure: (s) => spreadOf(s.projection.quotes), tolerance: 1e-9 }),
    maxDispatches<Desks, number>(length),
  );
  return async (dispatches) => {
    let done = 0;
    const start = clock();
    while (done < dispatches) {
      const check = termination.start();
      const projection: Desks = { quotes: Float64Array.of(100, 110, 90) };
      const t0 = performance.now();
      let lastMessage: Message<number> = { sender: 'user', content: 0 };
      for (let n = 1; ; n++) {
        const responder = responders[(n - 1) % 3] as Responder<Desks, number>;
        const state = {
          conversationId: 'bare',
          projection,
          lastMessage,
          queueDepth: 0,
          dispatchCount: n - 1,
          history: [],
          usage: NO_USAGE,
        };
        const out = (await responder.respond(lastMessage, state, {
          signal: NEVER,
          dispatchNumber: n,
          idempotencyKey: 'bare',
          attempt: 1,
          reportUsage: ignoreUsage,
        })) as Message<number>;
        projection.quotes[INDEX[out.sender] as number] = out.content;
        lastMessage = out;
        const decision = check({ ...state, lastMessage, dispatchCount: n }, performance.now() - t0);
        if (decision.terminate) {
          done += n;
          break;
        }
      }
    }
    return ((clock() - start) * 1e6) / done;
  };
}
const NEVER = new AbortController().signal;

/**
 * Issue 23's reference: the leanest honest hand-written loop doing the orchestrator's steps, per
 * dispatch: shift the next message from an array-backed FIFO, pick the responder round robin,
 * await its answer (a sync answer is used as it is), fold it into the projection, push it, read
 * the clock once, evaluate `spread <= tolerance || n >= max` inline, and give the event loop a
 * turn every 5 ms as the orchestrator does (without it a sync loop would starve timers). No
 * listener, no snapshot, no policy objects.
 */
function leanLoop(async: boolean, length: number): Variant['time'] {
  const responders = desks(async);
  const context = {
    signal: NEVER,
    dispatchNumber: 0,
    idempotencyKey: 'lean',
    attempt: 1,
    reportUsage: ignoreUsage,
  };
  const conversation = async (): Promise<number> => {
    const projection: Desks = { quotes: Float64Array.of(100, 110, 90) };
    const state = { projection } as unknown as ConversationState<Desks, number>;
    const queue: Message<number>[] = [{ sender: 'user', content: 0 }];
    let lastYield = performance.now();
    let next = 0;
    for (let n = 1; ; n++) {
      const message = queue.shift() as Message<number>;
      const responder = responders[next] as Responder<Desks, number>;
      next = next === 2 ? 0 : next + 1;
      let answer = responder.respond(message, state, context);
      if (answer instanceof Promise) answer = await answer;
      const out = answer as Message<number>;
      projection.quotes[INDEX[out.sender] as number] = out.content;
      queue.push(out);
      const now = performance.now();
      if (spreadOf(projection.quotes) <= 1e-9 || n >= length) return n;
      if (now - lastYield >= 5) {
        lastYield = now;
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
  };
  return async (dispatches) => {
    let done = 0;
    const start = clock();
    while (done < dispatches) done += await conversation();
    return ((clock() - start) * 1e6) / done;
  };
}

/**
 * Issue 23's comparison: the core loop (no listener) against the lean hand loop, side by side in
 * one process, rounds alternating the order; the ratio is the median of each round's own.
 */
async function leanTable(): Promise<void> {
  for (const async of [true, false]) {
    for (const length of [1_000, LONG]) {
      const core = orchestrator({ async, length });
      const slices = [
        (dispatches: number) => timeDispatches(core, dispatches),
        leanLoop(async, length),
      ];
      for (const slice of slices) await slice(DISPATCHES_PER_ROUND / 4); // warm-up
      const ns = slices.map(() => [] as number[]);
      const ratios: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const perRound: number[] = [];
        for (let k = 0; k < slices.length; k++) {
          const i = (k + round) % slices.length;
          perRound[i] = await (slices[i] as (d: number) => Promise<number>)(DISPATCHES_PER_ROUND);
        }
        perRound.forEach((x, i) => {
          ns[i]?.push(x);
        });
        ratios.push((perRound[0] as number) / (perRound[1] as number));
      }
      console.log(
        `| ${async ? 'async' : 'sync'} | ${length.toLocaleString('en')} | ${median(ns[1] as number[]).toFixed(0)} | ${median(ns[0] as number[]).toFixed(0)} | **${median(ratios).toFixed(2)}** |`,
      );
    }
  }
}

/** The lean table in a child process per context regime (AsyncLocalStorage cannot be undone). */
function leanTables(): void {
  console.log('\n### The core loop against a lean hand-written loop (ns / dispatch)\n');
  console.log(
    '| regime | responders | dispatches per conversation | lean loop | core loop (no listener) | core × lean |',
  );
  console.log('|---|---|---:|---:|---:|---:|');
  for (const regime of ['none', 'als'] as const) {
    const child = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url)], {
      env: { ...process.env, BENCH_ONLY: 'lean', BENCH_CONTEXT: regime },
      encoding: 'utf8',
    });
    if (child.status !== 0) throw new Error(`lean bench failed: ${child.stderr}`);
    const label = regime === 'none' ? 'clean' : 'AsyncLocalStorage on';
    process.stdout.write(
      child.stdout
        .split('\n')
        .filter((l) => l.startsWith('| '))
        .map((l) => `| ${label} ${l}`)
        .join('\n')
        .concat('\n'),
    );
  }
}

/**
 * Heap per waiting conversation: 20,000 conversations of async desks in flight, each parked on a
 * pending promise at its 11th invocation (after 10 dispatches), heap after a full GC, against the
 * heap before they started (everything warmed up). Counts what a waiting LLM conversation holds:
 * the run, its promise, its state, its policies' state, the pending answer's promise.
 */
async function waitingMemory(telemetry: boolean): Promise<number> {
  const conversations = 20_000;
  let parking = true;
  const parked: ((m: Message<number>) => void)[] = [];
  const responders = ['london', 'new_york', 'tokyo'].map(
    (name, i): Responder<Desks, number> => ({
      name,
      respond: async (_m, state) => {
        if (parking && state.dispatchCount === 10) {
          return new Promise<Message<number>>((resolve) => parked.push(resolve));
        }
        const q = state.projection.quotes;
        const mine = q[i] as number;
        const mean = ((q[0] as number) + (q[1] as number) + (q[2] as number) - mine) / 2;
        return { sender: name, content: mine + (mean - mine) * 0.01 };
      },
    }),
  );
  const o = orchestrator({
    responders,
    length: 1_000,
    ...(telemetry
      ? {
          observers: [
            createConversationTelemetry<Desks, number>({
              registry: new Registry(),
              tracer: sdkTracer('simple'),
            }),
          ],
        }
      : {}),
  });
  const park = async (n: number) => {
    const runs = Array.from({ length: n }, () => o.run({ sender: 'user', content: 0 }));
    while (parked.length < n) await new Promise((r) => setImmediate(r));
    return runs;
  };
  const release = async (runs: Promise<unknown>[]) => {
    parking = false;
    for (const resolve of parked.splice(0)) resolve({ sender: 'london', content: 100 });
    await Promise.allSettled(runs);
    parking = true;
  };
  await release(await park(200)); // warm-up: compiled code, the metrics' series
  gc();
  gc();
  const before = process.memoryUsage().heapUsed;
  const runs = await park(conversations);
  gc();
  gc();
  const perConversation = (process.memoryUsage().heapUsed - before) / conversations;
  await release(runs);
  return perConversation;
}

/** Each memory row in a process of its own, so that one configuration's heap does not colour another's. */
function waitingMemoryTable(): void {
  console.log(
    '\n### Heap per waiting conversation (20,000 parked after 10 dispatches, after a full GC)\n',
  );
  console.log('| configuration | heap per conversation |');
  console.log('|---|---:|');
  for (const telemetry of [false, true]) {
    const child = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url)], {
      env: { ...process.env, BENCH_ONLY: 'memory', BENCH_TELEMETRY: telemetry ? '1' : '0' },
      encoding: 'utf8',
    });
    const bytes = Number(child.stdout.trim().split('\n').at(-1));
    if (!Number.isFinite(bytes)) throw new Error(`memory bench failed: ${child.stderr}`);
    console.log(
      `| ${telemetry ? 'metrics + span events' : 'no telemetry'} | ${(bytes / 1024).toFixed(2)} KiB |`,
    );
  }
}
const NO_USAGE = Object.freeze({ inputTokens: 0, outputTokens: 0 });
const ignoreUsage = (): void => {};

function variants(async: boolean, length: number): Variant[] {
  trace.disable(); // no global tracer provider: the API's no-op tracer
  const noop = () => {};
  const v = (label: string, opts: Parameters<typeof orchestrator>[0]): Variant => {
    const o = orchestrator({ async, length, ...opts });
    return { label, time: (dispatches) => timeDispatches(o, dispatches) };
  };
  return [
    {
      label: 'reference: hand-written awaited loop, no orchestrator',
      time: bareLoop(async, length),
    },
    {
      label: 'reference: lean hand-written loop (issue 23)',
      time: leanLoop(async, length),
    },
    v('no listener', {}),
    v('no-op listener', { listener: noop }),
    v('telemetry attached, no tracer provider, no registry', {
      observers: [createConversationTelemetry<Desks, number>()],
    }),
    v('metrics only (no tracer provider)', {
      observers: [createConversationTelemetry<Desks, number>({ registry: new Registry() })],
    }),
    v('metrics + span events', {
      observers: [
        createConversationTelemetry<Desks, number>({
          registry: new Registry(),
          tracer: sdkTracer(),
        }),
      ],
    }),
    v('metrics + span events + exemplars', {
      observers: [
        createConversationTelemetry<Desks, number>({
          registry: openMetricsRegistry(),
          tracer: sdkTracer(),
        }),
      ],
    }),
    v('metrics + span events + child spans', {
      observers: [
        createConversationTelemetry<Desks, number>({
          registry: new Registry(),
          tracer: sdkTracer(),
          responderSpans: true,
        }),
      ],
    }),
    v('naive: addEvent + inc + observe per dispatch', {
      observers: [naiveObserver(new Registry())],
    }),
  ];
}

async function timeDispatches(
  o: ConversationOrchestrator<Desks, number>,
  dispatches: number,
): Promise<number> {
  let done = 0;
  const start = clock();
  while (done < dispatches) {
    const r = await o.run({ sender: 'user', content: 0 });
    done += r.dispatchCount;
  }
  return ((clock() - start) * 1e6) / done; // ns per dispatch
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

async function sideBySide(title: string, async: boolean, length: number): Promise<void> {
  const pick = process.env.BENCH_VARIANTS?.split(',').map(Number);
  const vs = variants(async, length).filter((_, i) => pick === undefined || pick.includes(i));
  const ns = vs.map(() => [] as number[]);
  const ratios = vs.map(() => [] as number[]);
  for (const v of vs) await v.time(DISPATCHES_PER_ROUND / 4); // warm-up
  for (let round = 0; round < ROUNDS; round++) {
    const perRound: number[] = [];
    // Rotate the order each round so no variant always runs first.
    for (let k = 0; k < vs.length; k++) {
      const i = (k + round) % vs.length;
      // No forced gc() here: a full collection shrinks the young generation, and the next
      // variant then pays for scavenges a real application would not (2x on the core loop).
      perRound[i] = await (vs[i] as Variant).time(DISPATCHES_PER_ROUND);
    }
    const base = perRound[vs.findIndex((v) => v.label === 'no-op listener')] as number;
    perRound.forEach((x, i) => {
      ns[i]?.push(x);
      ratios[i]?.push(x / base);
    });
  }
  console.log(`\n### ${title}\n`);
  console.log('| variant | ns / dispatch | dispatches / s | × no-op listener |');
  console.log('|---|---:|---:|---:|');
  vs.forEach((v, i) => {
    const n = median(ns[i] as number[]);
    console.log(
      `| ${v.label} | ${n.toFixed(0)} | ${(1e9 / n / 1e6).toFixed(2)} M | ${median(ratios[i] as number[]).toFixed(2)} |`,
    );
  });
}

/**
 * Issue 10's comparison: the telemetry (metrics + a span with 128 kept events) against the SDK's
 * floor for the same span (bench/floor.ts), side by side in one process, async desks, at 100,
 * 1,000 and 10,000 dispatches per conversation. Prints one table row per length.
 */
async function floorTable(): Promise<void> {
  const lengths = [100, 1_000, 10_000];
  for (const length of lengths) {
    const floor = sdkFloor<Desks>(sdkTracer('simple'));
    // Each orchestrator is built once, as an application does.
    const plain = orchestrator({ async: true, length, listener: () => {} });
    const floored = orchestrator({ async: true, length, listener: floor.listener });
    const flooredSpi = orchestrator({ async: true, length, observers: [floor.observer] });
    const observed = orchestrator({
      async: true,
      length,
      observers: [
        createConversationTelemetry<Desks, number>({
          registry: new Registry(),
          tracer: sdkTracer('simple'),
        }),
      ],
    });
    // The same span without the metrics: how much of the gap the exact histogram is.
    const spanOnly = orchestrator({
      async: true,
      length,
      observers: [createConversationTelemetry<Desks, number>({ tracer: sdkTracer('simple') })],
    });
    // Each slice runs whole conversations for about `dispatches` and answers its CPU time (ms)
    // and the dispatches it ran.
    type Slice = (dispatches: number) => Promise<{ ms: number; done: number }>;
    const sliceOf =
      (run: () => Promise<number>): Slice =>
      async (dispatches) => {
        let done = 0;
        const start = clock();
        while (done < dispatches) done += await run();
        return { ms: clock() - start, done };
      };
    const conversation = (o: ConversationOrchestrator<Desks, number>) => async () =>
      (await o.run({ sender: 'user', content: 0 })).dispatchCount;
    const slices: Slice[] = [
      sliceOf(conversation(plain)), // bare
      sliceOf(() => floor.run(floored)), // SDK floor
      sliceOf(conversation(observed)), // telemetry
      sliceOf(() => floor.run(flooredSpi)), // floor through the observer SPI
      sliceOf(conversation(spanOnly)), // telemetry, span events only
    ];
    const ns = slices.map(() => [] as number[]);
    const overFloor: number[] = [];
    const overSpiFloor: number[] = [];
    const floorOverBare: number[] = [];
    const spanOverSpiFloor: number[] = [];
    for (const slice of slices) await slice(DISPATCHES_PER_ROUND / 4); // warm-up
    // A round gives each variant DISPATCHES_PER_ROUND dispatches in SLICES slices, the variants
    // taking turns slice by slice (the order rotating): on a shared machine the neighbours' load
    // changes from one moment to the next, and variants timed side by side in short turns see
    // the same load. A slice is at least one conversation.
    const slice = Math.max(length, DISPATCHES_PER_ROUND / SLICES);
    for (let round = 0; round < FLOOR_ROUNDS; round++) {
      const ms = slices.map(() => 0);
      const done = slices.map(() => 0);
      for (let turn = 0; (done[0] as number) < DISPATCHES_PER_ROUND; turn++) {
        for (let k = 0; k < slices.length; k++) {
          const i = (k + turn + round) % slices.length;
          const r = await (slices[i] as Slice)(slice);
          ms[i] = (ms[i] as number) + r.ms;
          done[i] = (done[i] as number) + r.done;
        }
      }
      const perRound = ms.map((m, i) => (m * 1e6) / (done[i] as number));
      perRound.forEach((x, i) => {
        ns[i]?.push(x);
      });
      const [bare, fl, tel, spi, span] = perRound as [number, number, number, number, number];
      overFloor.push(tel / fl);
      overSpiFloor.push(tel / spi);
      floorOverBare.push(fl / bare);
      spanOverSpiFloor.push(span / spi);
    }
    const [bare, fl, tel, spi, span] = ns.map((x) => median(x)) as [
      number,
      number,
      number,
      number,
      number,
    ];
    console.log(
      `| ${length.toLocaleString('en')} | ${bare.toFixed(0)} | ${fl.toFixed(0)} | ${tel.toFixed(0)} | **${median(overFloor).toFixed(2)}** | ${spi.toFixed(0)} | ${median(overSpiFloor).toFixed(2)} | ${span.toFixed(0)} | ${median(spanOverSpiFloor).toFixed(2)} | ${median(floorOverBare).toFixed(2)} |`,
    );
  }
}

/** The floor table in a child process per context regime (AsyncLocalStorage cannot be undone). */
function floorTables(): void {
  for (const regime of ['none', 'als'] as const) {
    console.log(
      regime === 'none'
        ? '\n### The telemetry against the SDK floor, async desks, no context manager (ns / dispatch)\n'
        : '\n### The telemetry against the SDK floor, async desks, AsyncLocalStorage context manager as `NodeSDK` registers (ns / dispatch)\n',
    );
    console.log(
      '| dispatches per conversation | bare | SDK floor | telemetry | telemetry × floor | floor through the observer SPI | telemetry × that | telemetry without metrics | that × SPI floor | floor × bare |',
    );
    console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    const child = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url)], {
      env: { ...process.env, BENCH_ONLY: 'floor', BENCH_CONTEXT: regime },
      encoding: 'utf8',
    });
    if (child.status !== 0) throw new Error(`floor bench failed: ${child.stderr}`);
    process.stdout.write(
      child.stdout
        .split('\n')
        .filter((l) => l.startsWith('| '))
        .join('\n')
        .concat('\n'),
    );
  }
}

async function heapGrowth(
  label: string,
  observers: ConversationObserver<Desks, number>[],
): Promise<void> {
  const samples: number[] = [];
  const o = new ConversationOrchestrator<Desks, number>({
    name: 'desks',
    responders: desks(false),
    turnPolicy: roundRobin(),
    projection: {
      initial: () => ({ quotes: Float64Array.of(100, 110, 90) }),
      fold: (s, m) => {
        s.quotes[INDEX[m.sender] as number] = m.content + Math.random() * 1e-3; // never converges
        return s;
      },
    },
    termination: maxDispatches(1_000_000),
    observers,
    listener: (_s, _d, n) => {
      if (n === 1 || n === 1_000_000) {
        gc();
        samples.push(process.memoryUsage().heapUsed);
      }
    },
  });
  await o.run({ sender: 'user', content: 0 });
  const growth = ((samples[1] ?? 0) - (samples[0] ?? 0)) / 1024 / 1024;
  console.log(`| ${label} | ${growth.toFixed(2)} MB |`);
}

/**
 * One /metrics scrape of 10 orchestrators x 20 responders, three reasons each: as the plugin
 * formats its histograms, and with every metric formatted by prom-client from the structured
 * values of `get()` (the public-API way), on the same registry content.
 */
async function scrape(openMetrics: boolean): Promise<void> {
  const registry = openMetrics ? openMetricsRegistry() : new Registry();
  const telemetry = createConversationTelemetry({ registry, tracer: sdkTracer() });
  for (let k = 0; k < 10; k++) {
    const o = new ConversationOrchestrator<number, number>({
      name: `orchestrator_${k}`,
      responders: Array.from({ length: 20 }, (_, r) => ({
        name: `responder_${r}`,
        respond: (m: Message<number>) => ({ sender: `responder_${r}`, content: m.content + 1 }),
      })),
      turnPolicy: roundRobin(),
      projection: { initial: () => 0, fold: (s) => s + 1 },
      termination: maxDispatches(200),
      observers: [telemetry],
    });
    for (const reason of [0, 1, 2]) await o.run({ sender: 'user', content: reason });
  }
  // The same metrics with only `get()`: prom-client formats every line itself.
  const structured = openMetrics ? openMetricsRegistry() : new Registry();
  for (const metric of registry.getMetricsAsArray()) {
    const m = metric as unknown as {
      name: string;
      help: string;
      type: string;
      aggregator: string;
      get(): unknown;
    };
    structured.registerMetric({
      name: m.name,
      help: m.help,
      type: m.type,
      aggregator: m.aggregator,
      get: () => m.get(),
      reset: () => {},
    } as unknown as Parameters<Registry['registerMetric']>[0]);
  }
  const time = async (r: Registry | Registry<OpenMetricsContentType>) => {
    const times: number[] = [];
    let bytes = 0;
    for (let i = 0; i < 50; i++) {
      const start = clock();
      const text = await r.metrics();
      times.push(clock() - start);
      bytes = text.length;
    }
    return { ms: median(times), kib: bytes / 1024 };
  };
  // Alternate, so drift hits both alike.
  const hand: number[] = [];
  const viaPromClient: number[] = [];
  let sizes = { hand: 0, viaPromClient: 0 };
  for (let round = 0; round < 5; round++) {
    const a = await time(registry);
    const b = await time(structured);
    hand.push(a.ms);
    viaPromClient.push(b.ms);
    sizes = { hand: a.kib, viaPromClient: b.kib };
  }
  const format = openMetrics ? 'OpenMetrics (with exemplars)' : 'Prometheus text';
  console.log(
    `| ${format} | ${median(hand).toFixed(2)} ms | ${median(viaPromClient).toFixed(2)} ms | ${sizes.hand.toFixed(0)} KiB |`,
  );
}

/**
 * Every variant in a fresh process of its own, sync and async: what an application with one
 * orchestrator and one telemetry configuration sees (its call sites stay monomorphic). Ratios are
 * to the no-op listener's own process.
 */
function eachAlone(): void {
  console.log('\n### Each variant in a process of its own, 10,000-dispatch conversations\n');
  console.log(
    '| variant | sync ns / dispatch | async ns / dispatch | sync × no-op listener | async × no-op listener |',
  );
  console.log('|---|---:|---:|---:|---:|');
  const measure = (variant: number, async: boolean) => {
    const child = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url)], {
      env: {
        ...process.env,
        BENCH_ONLY: 'core',
        BENCH_CORE_VARIANT: String(variant),
        BENCH_CORE_ASYNC: async ? '1' : '0',
      },
      encoding: 'utf8',
    });
    const ns = Number(child.stdout.trim().split('\n').at(-1));
    if (!Number.isFinite(ns)) throw new Error(`bench variant ${variant} failed: ${child.stderr}`);
    return ns;
  };
  const labels = variants(false, LONG).map((v) => v.label);
  const rows = labels.map((_, variant) => ({
    sync: measure(variant, false),
    async: measure(variant, true),
  }));
  const noop = rows[labels.indexOf('no-op listener')] as { sync: number; async: number };
  labels.forEach((label, i) => {
    const { sync, async } = rows[i] as { sync: number; async: number };
    console.log(
      `| ${label} | ${sync.toFixed(0)} | ${async.toFixed(0)} | ${(sync / noop.sync).toFixed(2)} | ${(async / noop.async).toFixed(2)} |`,
    );
  });
}

/** The side-by-side tables of long conversations, sync responders then async. */
async function syncAndAsyncTables(): Promise<void> {
  for (const async of [false, true]) {
    await sideBySide(
      `${async ? 'Async' : 'Sync'} responders, ${LONG.toLocaleString('en')}-dispatch conversations`,
      async,
      LONG,
    );
  }
}

async function main(): Promise<void> {
  console.log(`# conversation-orchestrator benchmark`);
  console.log(
    `\nNode ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}; ${ROUNDS} rounds (${FLOOR_ROUNDS} for the floor) of ${DISPATCHES_PER_ROUND.toLocaleString('en')} dispatches per variant, medians; ${WALL ? 'wall time' : 'CPU time of the process'}; load average ${loadavg()[0]?.toFixed(1)} at the start.`,
  );
  const only = process.env.BENCH_ONLY;
  if (only === 'durable') {
    await durableTable(ROUNDS, clock);
    return;
  }
  if (only === 'floor') {
    if (process.env.BENCH_CONTEXT === 'als') {
      context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    }
    await floorTable();
    return;
  }
  if (only === 'lean') {
    if (process.env.BENCH_CONTEXT === 'als') {
      // As under NodeSDK with a span active: the manager on and a context entered, so that
      // AsyncLocalStorage's promise hooks run for every await of the process, both loops alike.
      context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
      new AsyncLocalStorage().enterWith({ active: true });
    }
    await leanTable();
    return;
  }
  if (only === 'memory') {
    process.stdout.write(`${await waitingMemory(process.env.BENCH_TELEMETRY === '1')}\n`);
    return;
  }
  if (only === 'tables') {
    await syncAndAsyncTables();
    return;
  }
  if (only === 'leans') {
    leanTables();
    waitingMemoryTable();
    return;
  }
  if (only === 'core') {
    // One variant in a process of its own, as an application with one orchestrator and one
    // telemetry configuration runs it: nothing else shares its call sites. Prints the median ns.
    const variant = Number(process.env.BENCH_CORE_VARIANT);
    const time = (variants(process.env.BENCH_CORE_ASYNC === '1', LONG)[variant] as Variant).time;
    await time(DISPATCHES_PER_ROUND); // warm-up
    const ns: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      ns.push(await time(DISPATCHES_PER_ROUND));
    }
    process.stdout.write(`${median(ns)}\n`);
    return;
  }
  // The tables that one BENCH_ONLY value runs alone.
  const alone: Record<string, () => unknown> = {
    alone: () => eachAlone(),
    scrape: async () => {
      await scrape(false);
      await scrape(true);
    },
    sampler: () => samplerTable(ROUNDS, clock),
    'otel-metrics': () => otelMetricsTable(ROUNDS, DISPATCHES_PER_ROUND),
    stores: () => storesTables(),
    fleet: () => fleetTables(),
    fanout: () => fanoutTable(),
    langgraph: () => langgraphTable(),
    'langgraph-transcript': () => langgraphTranscriptTable(),
    'transcript-child': () => bigTranscriptChild(),
    transcript: () => transcriptTable(),
    'network-stores': () => networkStoresTable(Number(process.env.BENCH_STORE_ROUNDS ?? 7)),
  };
  if (only !== undefined && Object.hasOwn(alone, only)) {
    await (alone[only] as () => unknown)();
    return;
  }
  leanTables();
  waitingMemoryTable();
  floorTables();
  await syncAndAsyncTables();

  console.log('\n### Heap growth over one 1,000,000-dispatch conversation (after a full GC)\n');
  console.log('| configuration | growth |');
  console.log('|---|---:|');
  await heapGrowth('default options', []);
  await heapGrowth('with metrics + span events', [
    createConversationTelemetry<Desks, number>({ registry: new Registry(), tracer: sdkTracer() }),
  ]);

  console.log('\n### One /metrics scrape, 10 orchestrators × 20 responders\n');
  console.log(
    '| format | histograms formatted by the plugin | everything formatted by prom-client | size |',
  );
  console.log('|---|---:|---:|---:|');
  await scrape(false);
  await scrape(true);

  await samplerTable(ROUNDS, clock);
  await otelMetricsTable(ROUNDS, DISPATCHES_PER_ROUND);
  await durableTable(ROUNDS, clock);
  await transcriptTable();
  await storesTables();
  await networkStoresTable(Number(process.env.BENCH_STORE_ROUNDS ?? 7));
  await langgraphTable();
  await langgraphTranscriptTable();
  await fleetTables();
  await fanoutTable();
}

await main();
