/**
 * `npm run chaos [-- --duration 60 --workers 3 --rate 8]`: the demo's fleet under fire. Starts a
 * local redis-server (AOF, `appendfsync always`), a fleet of worker processes (service/worker.ts),
 * enqueues seeded conversations (the desks' markets and every quote derived from a seed), and
 * SIGKILLs a random worker every few seconds, restarting it a second later. Then it waits for
 * every conversation to end and prints one table: conversations started, ended, resumed after a
 * crash, re-invoked dispatches, lost, and how many endings equal those of a single-process run of
 * the same seeds (reason, dispatch count, final spread). Exits 1 if anything is lost or differs.
 *
 * Bounded: `--duration` seconds of work once the workers are up (enqueueing in the first 60 %,
 * killing until 80 %), then at most `--duration` / 2 + 30 s for the last conversations to end.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { parseConfig, type Scenario, type ServiceConfig } from '../service/config.ts';
import {
  createDeskOrchestrator,
  type DeskMessage,
  market,
  seededRandom,
} from '../service/desks/market.ts';
import { DEMO_ORCHESTRATORS, DEMO_QUEUE } from '../service/fleet/worker-names.ts';
import { createConversationQueue } from '../src/fleet/index.ts';
import { ConversationError, type Message } from '../src/index.ts';
import { createRedisStore } from '../src/stores/redis/index.ts';
import { startRedis } from '../test/helpers/redis.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const WORKER_ENTRY = join(ROOT, 'service/worker.ts');
/**
 * The scenarios of a chaos run: those whose ending the seed alone decides. The desks also stop at
 * 15 s (`timeout()`), a wall-clock rule no seed decides: a `slow` or `never` market (300-400
 * dispatches) on a loaded 2-core machine, each dispatch a synchronous commit to an fsyncing Redis,
 * took 15 s in a first run and 34 of 288 ended `timeout` instead of as in one process. Calm and
 * failing markets end within 30 dispatches, far from it even after two kills.
 */
const MIX: readonly [Scenario, number][] = [
  ['converge', 7],
  ['fail', 3],
];
/** Desk latency, ms. */
const LATENCY_MS = '2';

interface Ending {
  readonly reason: string;
  readonly dispatchCount: number;
  readonly spread: number | undefined;
}

interface Seeded {
  readonly id: string;
  readonly orchestrator: string;
  readonly desks: number;
  readonly input: Message<DeskMessage>;
}

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '60' },
    workers: { type: 'string', default: '3' },
    rate: { type: 'string', default: '8' },
    seed: { type: 'string', default: '1' },
  },
  strict: true,
});
const positive = (name: string, value: string, max: number): number => {
  const n = Number(value);
  if (!/^\d+(\.\d+)?$/.test(value) || n <= 0 || n > max) {
    process.stderr.write(
      `Expected --${name} to be a number above 0 and at most ${max}, got \`${value}\`\n`,
    );
    process.exit(2);
  }
  return n;
};
const durationS = positive('duration', values.duration, 3600);
const workerCount = Math.floor(positive('workers', values.workers, 16));
const rate = positive('rate', values.rate, 200);
const firstSeed = Math.floor(positive('seed', values.seed, 1e9));
if (workerCount < 2) {
  process.stderr.write('Expected --workers to be at least 2 (one is killed while another works)\n');
  process.exit(2);
}

const config = parseConfig(['--latency-ms', LATENCY_MS], {}) as ServiceConfig;
const log = (line: string) => process.stderr.write(`chaos: ${line}\n`);

/** Conversation `n` of the run: its orchestrator, scenario and market all from its seed. */
function seeded(n: number): Seeded {
  const seed = firstSeed * 100_003 + n;
  const index = n % DEMO_ORCHESTRATORS.length;
  const desks = Math.min(config.desks + index, 8);
  const total = MIX.reduce((s, [, w]) => s + w, 0);
  let r = seededRandom(seed, 7)() * total;
  let scenario: Scenario = 'converge';
  for (const [name, weight] of MIX) {
    scenario = name;
    r -= weight;
    if (r < 0) break;
  }
  return {
    id: `chaos-${firstSeed}-${n}`,
    orchestrator: DEMO_ORCHESTRATORS[index] as string,
    desks,
    input: { sender: 'market', content: { market: market(scenario, desks, config, seed) } },
  };
}

/** How a conversation ended, from `run()`'s result or error, or from a stored result. */
function ending(result: unknown): Ending {
  const r = result as {
    decision?: { reason?: string };
    error?: { reason?: string };
    reason?: string;
    dispatchCount: number;
    state?: { projection?: { spread?: number } };
  };
  return {
    reason: r.error?.reason ?? r.reason ?? r.decision?.reason ?? 'unknown',
    dispatchCount: r.dispatchCount,
    spread: r.state?.projection?.spread,
  };
}

/** The same seeds, one process, no crash: the endings the fleet must reproduce. */
async function singleProcess(conversations: readonly Seeded[]): Promise<Map<string, Ending>> {
  const orchestrators = new Map(
    DEMO_ORCHESTRATORS.map((name, i) => [
      name as string,
      createDeskOrchestrator(name, Math.min(config.desks + i, 8), config, [], undefined, () => {}),
    ]),
  );
  const endings = new Map<string, Ending>();
  let next = 0;
  const lane = async () => {
    while (next < conversations.length) {
      const c = conversations[next++] as Seeded;
      const orchestrator = orchestrators.get(c.orchestrator);
      try {
        endings.set(c.id, ending(await orchestrator?.run(c.input, { conversationId: c.id })));
      } catch (error) {
        if (!(error instanceof ConversationError)) throw error;
        endings.set(c.id, { ...ending(error), spread: error.state.projection.spread });
      }
    }
  };
  await Promise.all(Array.from({ length: 32 }, lane));
  return endings;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<number> {
  const redis = await startRedis({ aof: true });
  const dir = mkdtempSync(join(tmpdir(), 'co-chaos-'));
  const logFile = join(dir, 'invocations.ndjson');
  const workers = new Map<string, ChildProcess>();
  const ready = new Set<string>();
  let stopping = false;
  let kills = 0;
  const spawnWorker = (id: string) => {
    ready.delete(id);
    const child = spawn(process.execPath, ['--import', 'tsx', WORKER_ENTRY], {
      cwd: ROOT,
      env: {
        ...process.env,
        WORKER_ID: id,
        INVOCATION_LOG: logFile,
        FLEET_ARGS: JSON.stringify([
          '--redis',
          redis.url,
          '--concurrency',
          '50',
          '--latency-ms',
          LATENCY_MS,
        ]),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes(`${id} ready`)) ready.add(id);
    });
    child.stderr?.on('data', () => {});
    workers.set(id, child);
  };
  const store = createRedisStore({ url: redis.url });
  const queue = createConversationQueue({ connection: redis.url, queueName: DEMO_QUEUE });
  try {
    for (let i = 1; i <= workerCount; i++) spawnWorker(`worker-${i}`);
    const count = Math.max(1, Math.round(durationS * 0.6 * rate));
    const conversations = Array.from({ length: count }, (_, n) => seeded(n));
    log(`${count} seeded conversations; the single-process run while ${workerCount} workers start`);
    const expected = await singleProcess(conversations);
    const bootDeadline = Date.now() + 120_000;
    while (ready.size < workerCount) {
      if (Date.now() > bootDeadline)
        throw new Error(`only ${ready.size} of ${workerCount} workers started in 120 s`);
      await sleep(100);
    }
    log(
      `${workerCount} workers ready: enqueueing for ${(durationS * 0.6).toFixed(0)} s, killing for ${(durationS * 0.8).toFixed(0)} s`,
    );

    const t0 = Date.now();
    const chaos = (async () => {
      const every = Math.max(2_000, (durationS * 1000) / 8);
      while (!stopping && Date.now() - t0 < durationS * 800) {
        await sleep(every * (0.5 + Math.random()));
        const alive = [...ready];
        if (stopping || alive.length < 2) continue;
        const id = alive[Math.floor(Math.random() * alive.length)] as string;
        const victim = workers.get(id) as ChildProcess;
        victim.kill('SIGKILL');
        kills++;
        ready.delete(id);
        log(`SIGKILL ${id} (pid ${victim.pid})`);
        await new Promise((r) => victim.once('exit', r));
        setTimeout(() => !stopping && spawnWorker(id), 1_000);
      }
    })();
    for (const [n, c] of conversations.entries()) {
      const due = t0 + (n * 1000) / rate;
      if (due > Date.now()) await sleep(due - Date.now());
      await queue.start(c.orchestrator, c.input, { conversationId: c.id });
    }
    await chaos;

    const settleDeadline = Date.now() + (durationS * 1000) / 2 + 30_000;
    const ended = new Map<string, Ending>();
    for (;;) {
      for (const c of conversations) {
        if (ended.has(c.id)) continue;
        const stored = await store.get(c.id);
        if (stored?.status === 'ended') ended.set(c.id, ending(stored.result));
      }
      if (ended.size === conversations.length || Date.now() > settleDeadline) break;
      await sleep(500);
    }

    const lines = readFileSync(logFile, 'utf8')
      .split('\n')
      .filter((l) => l.endsWith('}'));
    const entries = lines.map(
      (l) => JSON.parse(l) as { resumed?: string; invoked?: string; attempt?: number },
    );
    const resumed = new Set(entries.flatMap((e) => (e.resumed === undefined ? [] : [e.resumed])));
    const reinvoked = entries.filter((e) => (e.attempt ?? 1) > 1).length;
    const differing = conversations.filter((c) => {
      const got = ended.get(c.id);
      return got !== undefined && JSON.stringify(got) !== JSON.stringify(expected.get(c.id));
    });
    for (const c of differing.slice(0, 5)) {
      log(
        `${c.id} ended ${JSON.stringify(ended.get(c.id))}, single process ${JSON.stringify(expected.get(c.id))}`,
      );
    }
    const lost = conversations.length - ended.size;
    const equal = ended.size - differing.length;
    const rows: [string, string][] = [
      ['conversations started', String(conversations.length)],
      ['ended', String(ended.size)],
      ['resumed after a crash', String(resumed.size)],
      ['re-invoked dispatches', String(reinvoked)],
      ['lost', String(lost)],
      ['endings equal to a single-process run', `${equal} of ${ended.size}`],
    ];
    const width = Math.max(...rows.map(([k]) => k.length));
    const valueWidth = Math.max(...rows.map(([, v]) => v.length));
    process.stdout.write(
      `chaos: ${durationS} s, ${workerCount} workers, ${kills} SIGKILLs, redis-server with AOF (appendfsync always)\n${rows
        .map(([k, v]) => `| ${k.padEnd(width)} | ${v.padStart(valueWidth)} |`)
        .join('\n')}\n`,
    );
    return lost === 0 && differing.length === 0 ? 0 : 1;
  } finally {
    stopping = true;
    for (const child of workers.values())
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await Promise.allSettled([queue.close(), store.close()]);
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `chaos: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(2);
  },
);
