/**
 * The fan-out bench row (issue 32): the demo service at its defaults, first with no WebSocket
 * client, then with 2,000 watching (`bench/fanout-clients.mjs`, a child process of its own,
 * connecting with `ws`), each in a fresh service. Per phase, over the same window: the share of
 * the conversations ended that timed out, dispatch latency p50/p99 (from the service's
 * `orchestrator_dispatch_duration_seconds` histogram, interpolated within its buckets), the
 * longest event loop delay it reports, and /healthz latency p99 (probed every 100 ms).
 *
 * Wall time: what a viewer and a conversation see. `BENCH_FANOUT_S` sets the window (30 s),
 * `BENCH_FANOUT_CLIENTS` the clients (2000), `BENCH_FANOUT_ROUNDS` the repeats (1),
 * `BENCH_FANOUT_ROOT` the checkout whose service runs (this one), for a before and after.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const WINDOW_S = Number(process.env.BENCH_FANOUT_S ?? 30);
const CLIENTS = Number(process.env.BENCH_FANOUT_CLIENTS ?? 2000);
const ROUNDS = Number(process.env.BENCH_FANOUT_ROUNDS ?? 1);
const ROOT = resolve(process.env.BENCH_FANOUT_ROOT ?? '.');
/** The service runs this long before the clients come (the desks warm up, the mix settles). */
const WARM_S = 5;
const PROBE_MS = 100;

interface Phase {
  readonly clients: number;
  readonly ended: number;
  readonly timeoutShare: number;
  readonly dispatchP50Ms: number;
  readonly dispatchP99Ms: number;
  readonly loopDelayMaxMs: number;
  readonly healthzP99Ms: number;
  readonly healthzMaxMs: number;
  readonly framesPerClientPerS: number;
  /** CPU seconds per second of the service, and of the clients' process. */
  readonly serviceCpu: number;
  readonly clientsCpu: number;
}

function lines(child: ChildProcessWithoutNullStreams): () => string {
  let out = '';
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr.on('data', () => {});
  return () => out;
}

async function until(what: string, check: () => boolean, ms: number): Promise<void> {
  const deadline = performance.now() + ms;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`fanout bench: ${what} did not happen`);
    await sleep(50);
  }
}

async function metrics(port: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}

/** Every sample of `name`, with its labels as written. */
function samples(text: string, name: string): { labels: string; value: number }[] {
  const out: { labels: string; value: number }[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const close = line.indexOf('}');
    const labels = close === -1 ? '' : line.slice(name.length + 1, close);
    const rest = line.slice(close === -1 ? name.length : close + 1);
    out.push({ labels, value: Number(rest.trim().split(' ')[0]) });
  }
  return out;
}

function endings(text: string): Map<string, number> {
  const byReason = new Map<string, number>();
  for (const { labels, value } of samples(text, 'orchestrator_conversations_ended_total')) {
    const reason = /reason="([^"]*)"/.exec(labels)?.[1] ?? '';
    byReason.set(reason, (byReason.get(reason) ?? 0) + value);
  }
  return byReason;
}

/** The dispatch duration histogram summed over orchestrators: cumulative count per bound. */
function dispatchBuckets(text: string): Map<number, number> {
  const buckets = new Map<number, number>();
  for (const { labels, value } of samples(text, 'orchestrator_dispatch_duration_seconds_bucket')) {
    const le = /le="([^"]*)"/.exec(labels)?.[1] ?? '';
    const bound = le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le);
    buckets.set(bound, (buckets.get(bound) ?? 0) + value);
  }
  return buckets;
}

/** histogram_quantile's interpolation over the window's counts (after minus before). */
function quantile(q: number, before: Map<number, number>, after: Map<number, number>): number {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const counts = bounds.map((b) => (after.get(b) ?? 0) - (before.get(b) ?? 0));
  const total = counts[counts.length - 1] ?? 0;
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (let i = 0; i < bounds.length; i++) {
    const upper = bounds[i] as number;
    const count = counts[i] as number;
    if (count >= rank) {
      if (upper === Number.POSITIVE_INFINITY) return lower;
      return lower + ((upper - lower) * (rank - below)) / Math.max(1, count - below);
    }
    lower = upper;
    below = count;
  }
  return lower;
}

function percentile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? 0;
}

async function phase(clients: number): Promise<Phase> {
  const service = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'service/main.ts',
      ...['--port', '0', '--progress-s', '3600'],
      ...['--max-clients', String(clients + 10), '--max-clients-per-address', String(clients + 10)],
    ],
    { cwd: ROOT, stdio: 'pipe' },
  );
  const serviceOut = lines(service);
  let watchers: ChildProcessWithoutNullStreams | undefined;
  try {
    await until('the service listening', () => /listening on/.test(serviceOut()), 60_000);
    const port = Number(/listening on http:\/\/[^:]+:(\d+)/.exec(serviceOut())?.[1]);
    await sleep(WARM_S * 1000);
    let watcherOut = () => '';
    if (clients > 0) {
      watchers = spawn(
        process.execPath,
        [resolve('bench/fanout-clients.mjs'), String(port), String(clients)],
        { stdio: 'pipe' },
      );
      watcherOut = lines(watchers);
      await until(`${clients} clients connected`, () => /ready \d+/.test(watcherOut()), 120_000);
    }
    // The clients count from here: the window.
    watchers?.kill('SIGUSR2');
    const before = await metrics(port);
    const start = performance.now();
    const healthz: number[] = [];
    while (performance.now() - start < WINDOW_S * 1000) {
      const sent = performance.now();
      await (await fetch(`http://127.0.0.1:${port}/healthz`)).text();
      const took = performance.now() - sent;
      healthz.push(took);
      await sleep(Math.max(0, PROBE_MS - took));
    }
    const after = await metrics(port);
    const seconds = (performance.now() - start) / 1000;
    let frames = 0;
    let clientsCpu = 0;
    if (watchers !== undefined) {
      const w = watchers;
      w.kill('SIGTERM');
      await until('the clients counting', () => /frames \d+/.test(watcherOut()), 10_000);
      frames = Number(/frames (\d+)/.exec(watcherOut())?.[1]);
      clientsCpu = Number(/cpu ([\d.]+)/.exec(watcherOut())?.[1]) / seconds;
      watchers = undefined;
    }
    const endedBefore = endings(before);
    let ended = 0;
    let timedOut = 0;
    for (const [reason, n] of endings(after)) {
      const delta = n - (endedBefore.get(reason) ?? 0);
      ended += delta;
      if (reason === 'timeout') timedOut += delta;
    }
    const b = dispatchBuckets(before);
    const a = dispatchBuckets(after);
    return {
      clients,
      ended,
      timeoutShare: ended === 0 ? 0 : timedOut / ended,
      dispatchP50Ms: quantile(0.5, b, a) * 1000,
      dispatchP99Ms: quantile(0.99, b, a) * 1000,
      loopDelayMaxMs:
        (samples(after, 'demo_event_loop_delay_max_seconds')[0]?.value ?? Number.NaN) * 1000,
      healthzP99Ms: percentile(healthz, 0.99),
      healthzMaxMs: Math.max(...healthz),
      framesPerClientPerS: clients === 0 ? 0 : frames / clients / seconds,
      serviceCpu:
        ((samples(after, 'process_cpu_seconds_total')[0]?.value ?? 0) -
          (samples(before, 'process_cpu_seconds_total')[0]?.value ?? 0)) /
        seconds,
      clientsCpu,
    };
  } finally {
    watchers?.kill('SIGKILL');
    service.kill('SIGTERM');
    await new Promise((r) => service.once('exit', r));
  }
}

/** Prints the table: each phase's figures, the clients' beside none in one run. */
export async function fanoutTable(): Promise<void> {
  console.log(
    `\n### The live feed: the service's desks with 0 and ${CLIENTS.toLocaleString('en')} WebSocket clients watching (defaults, ${WINDOW_S} s windows, wall time)\n`,
  );
  console.log(
    '| clients | conversations ended | timed out | dispatch p50 | dispatch p99 | event loop delay, max | /healthz p99 | /healthz max | frames per client per s | CPU: service, clients |',
  );
  console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  const phases: Phase[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    for (const clients of [0, CLIENTS]) {
      const p = await phase(clients);
      phases.push(p);
      console.log(
        `| ${p.clients.toLocaleString('en')} | ${p.ended} | ${(p.timeoutShare * 100).toFixed(1)}% | ${p.dispatchP50Ms.toFixed(1)} ms | ${p.dispatchP99Ms.toFixed(1)} ms | ${p.loopDelayMaxMs.toFixed(0)} ms | ${p.healthzP99Ms.toFixed(1)} ms | ${p.healthzMaxMs.toFixed(1)} ms | ${p.framesPerClientPerS.toFixed(1)} | ${(p.serviceCpu * 100).toFixed(0)}%, ${(p.clientsCpu * 100).toFixed(0)}% |`,
      );
    }
  }
  const none = phases.filter((p) => p.clients === 0);
  const many = phases.filter((p) => p.clients === CLIENTS);
  const mean = (ps: Phase[], f: (p: Phase) => number) =>
    ps.reduce((s, p) => s + f(p), 0) / Math.max(1, ps.length);
  const ratio = (f: (p: Phase) => number) => (mean(many, f) / mean(none, f)).toFixed(2);
  console.log(
    `\n${CLIENTS.toLocaleString('en')} clients vs none: timeout share ${ratio((p) => p.timeoutShare)}x, dispatch p50 ${ratio((p) => p.dispatchP50Ms)}x, p99 ${ratio((p) => p.dispatchP99Ms)}x, /healthz p99 ${ratio((p) => p.healthzP99Ms)}x.`,
  );
}
