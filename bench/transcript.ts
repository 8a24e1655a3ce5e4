/**
 * Long conversations (issue 41; `npm run bench`, or `BENCH_ONLY=transcript`): a transcript
 * conversation, two responders in round robin each adding a message of 1 KB that the projection
 * keeps (a list growing by one message per dispatch), committed with `durability: 'sync'`.
 *
 * Per store (memory, SQLite, and a real PostgreSQL 15 and Redis 7 started here, each skipped when
 * not installed), side by side in one run: the cost of a dispatch (wall time between two listener
 * calls, median over a window of 50 dispatches, then over 3 conversations) at dispatch 50 to
 * 5,000, and the bytes
 * written per dispatch there (the entry, plus the share of the snapshot that later covered it:
 * snapshots amortized and counted; the conversation runs on until a snapshot covers the last
 * window, and its ending, one whole write per conversation, is not in any window). The same with whole checkpoints (`incremental: false`, the
 * way every commit was written before) up to dispatch 1,000, where it already costs 20× more.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  anyOf,
  type Checkpoint,
  type CheckpointEntry,
  type CheckpointOptions,
  ConversationOrchestrator,
  type ConversationStore,
  createMemoryStore,
  type IncrementalStore,
  type Lease,
  maxDispatches,
  roundRobin,
  stopWhen,
} from '../src/index.ts';
import { createPostgresStore } from '../src/stores/postgres/index.ts';
import { createRedisStore } from '../src/stores/redis/index.ts';
import { createSqliteStore } from '../src/stores/sqlite/index.ts';
import { hasPostgres, startPostgres } from '../test/helpers/postgres.ts';
import { hasRedisServer, startRedis } from '../test/helpers/redis.ts';
import {
  type Transcript,
  transcriptProjection,
  transcriptResponders,
} from '../test/helpers/transcript.ts';

const DISPATCHES = Number(process.env.BENCH_TRANSCRIPT_DISPATCHES ?? 5_000);
const WHOLE_DISPATCHES = Math.min(DISPATCHES, 1_000);
const AT = [50, 500, 1_000, 2_000, DISPATCHES] as const;
const WINDOW = 50;
export const PAD = 'x'.repeat(1_000);

/** What the store was asked to write, per commit: its seq, kind and bytes. */
interface Written {
  readonly entries: Map<number, number>;
  /** Snapshots and whole commits: the seq they are at, their bytes. */
  readonly bases: { readonly seq: number; readonly bytes: number }[];
}

function recording(store: ConversationStore, written: Written): ConversationStore {
  const s = store as IncrementalStore;
  const forward = <K extends keyof IncrementalStore>(k: K) =>
    (s[k] as (...a: unknown[]) => unknown).bind(s) as IncrementalStore[K];
  const base = (checkpoint: Checkpoint) =>
    written.bases.push({
      seq: checkpoint.seq,
      bytes: Buffer.byteLength(checkpoint.state) + Buffer.byteLength(checkpoint.result ?? ''),
    });
  const wrapped: IncrementalStore = {
    name: s.name,
    maxCheckpointBytes: s.maxCheckpointBytes,
    maxSnapshotBytes: s.maxSnapshotBytes,
    create: (checkpoint, owner, leaseMs) => {
      base(checkpoint);
      return s.create(checkpoint, owner, leaseMs);
    },
    commit: (checkpoint, lease, leaseMs) => {
      base(checkpoint);
      return s.commit(checkpoint, lease, leaseMs);
    },
    append: (entry: CheckpointEntry, lease: Lease, leaseMs: number) => {
      written.entries.set(entry.seq, Buffer.byteLength(entry.entry));
      return s.append(entry, lease, leaseMs);
    },
    snapshot: (checkpoint, lease) => {
      base(checkpoint);
      return s.snapshot(checkpoint, lease);
    },
    acquire: forward('acquire'),
    renew: forward('renew'),
    release: forward('release'),
    get: forward('get'),
    delete: forward('delete'),
    list: forward('list'),
    stats: forward('stats'),
    purgeExpired: forward('purgeExpired'),
    close: forward('close'),
  };
  if (typeof s.append !== 'function') {
    const { append: _a, snapshot: _s, ...whole } = wrapped;
    return whole;
  }
  return wrapped;
}

/** Runs one transcript conversation; the wall time of each dispatch (index = dispatch - 1). */
export async function run(
  store: ConversationStore,
  dispatches: number,
  checkpoints: CheckpointOptions,
  done: () => boolean,
): Promise<number[]> {
  const times: number[] = [];
  let last = 0;
  const o = new ConversationOrchestrator<Transcript, string>({
    name: 'bench_transcript',
    store,
    durability: 'sync',
    checkpoints,
    responders: transcriptResponders(
      (name, _m, state) => `${name}:${state.projection.lines.length}:${PAD}`,
    ),
    turnPolicy: roundRobin(),
    projection: transcriptProjection(),
    // Past `dispatches`, until `done`: the entries measured are then covered by a snapshot.
    termination: anyOf(
      maxDispatches(dispatches * 5),
      stopWhen((s) => s.dispatchCount >= dispatches && done(), 'converged'),
    ),
    listener: () => {
      const now = performance.now();
      times.push(now - last);
      last = now;
    },
  });
  last = performance.now();
  await o.run({ sender: 'user', content: 'begin' });
  return times;
}

export const median = (xs: readonly number[]) =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

/** The window of dispatches around `at` (ending at the conversation's last). */
export function window(at: number, last: number): [number, number] {
  const to = Math.min(last, at + WINDOW / 2);
  return [Math.max(1, to - WINDOW + 1), to];
}

/**
 * Bytes written per dispatch in a window: each commit's own bytes, plus for an entry the share
 * of the snapshot that covered it (its bytes over the entries it covered). Dispatch d is seq d+1.
 */
function bytesPerDispatch(written: Written, from: number, to: number): number {
  const bases = [...written.bases].sort((a, b) => a.seq - b.seq);
  let total = 0;
  for (let d = from; d <= to; d++) {
    const seq = d + 1;
    const entry = written.entries.get(seq);
    if (entry === undefined) {
      total += bases.find((b) => b.seq === seq)?.bytes ?? 0;
      continue;
    }
    // The base before this entry and the one that covered it.
    const i = bases.findIndex((b) => b.seq >= seq);
    const covering = i < 0 ? undefined : bases[i];
    const before = i <= 0 ? undefined : bases[i - 1];
    let share = 0;
    if (covering !== undefined && before !== undefined) {
      share = covering.bytes / Math.max(1, covering.seq - before.seq);
    }
    total += entry + share;
  }
  return total / (to - from + 1);
}

interface Row {
  readonly name: string;
  readonly ms: number[];
  readonly bytes: number[];
}

/** Rounds per row: each a conversation of its own; the figures are the medians of the rounds. */
const ROUNDS = Number(process.env.BENCH_TRANSCRIPT_ROUNDS ?? 3);

async function measure(
  name: string,
  newStore: () => ConversationStore,
  dispatches: number,
  checkpoints: CheckpointOptions,
): Promise<Row> {
  const ms: number[][] = AT.map(() => []);
  const bytes: number[][] = AT.map(() => []);
  for (let round = 0; round < ROUNDS; round++) {
    const written: Written = { entries: new Map(), bases: [] };
    const store = recording(newStore(), written);
    const last = AT.filter((at) => at <= dispatches).at(-1) as number;
    const [, lastMeasured] = window(last, dispatches);
    // Run until a snapshot covers the last window (a whole-checkpoint run writes none: it stops
    // at `dispatches`).
    const times = await run(
      store,
      dispatches,
      checkpoints,
      () =>
        checkpoints.incremental === false || written.bases.some((b) => b.seq > lastMeasured + 1),
    );
    await store.close();
    AT.forEach((at, i) => {
      if (at > dispatches) return;
      const [from, to] = window(at, dispatches);
      ms[i]?.push(median(times.slice(from - 1, to)));
      bytes[i]?.push(bytesPerDispatch(written, from, to));
    });
  }
  const of = (xs: number[][]) => xs.map((x) => (x.length === 0 ? Number.NaN : median(x)));
  return { name, ms: of(ms), bytes: of(bytes) };
}

const cell = (x: number, digits: number) => (Number.isNaN(x) ? '—' : x.toFixed(digits));

const BIG_MB = Number(process.env.BENCH_TRANSCRIPT_MB ?? 100);

/** The transcript's conversation for the big run: line i as the responders write it. */
function bigOrchestrator(store: ConversationStore, until: (dispatchCount: number) => boolean) {
  return new ConversationOrchestrator<Transcript, string>({
    name: 'bench_big_transcript',
    store,
    responders: transcriptResponders(
      (name, _m, state) => `${name}:${state.projection.lines.length}:${PAD}`,
    ),
    turnPolicy: roundRobin(),
    projection: transcriptProjection(),
    termination: stopWhen((s) => until(s.dispatchCount), 'converged'),
    listener: (_state, _decision, dispatchCount) => {
      if (dispatchCount % 1_000 === 0) process.stdout.write(`${dispatchCount}\n`);
    },
  });
}

/** `BENCH_ONLY=transcript-child`: runs the big transcript on SQLite until it is killed. */
export async function bigTranscriptChild(): Promise<void> {
  const store = createSqliteStore({ path: process.env.BENCH_TRANSCRIPT_DB as string });
  await bigOrchestrator(store, () => false).run(
    { sender: 'user', content: 'begin' },
    { conversationId: 'big' },
  );
}

/**
 * A `BIG_MB` transcript on SQLite in a child process, SIGKILLed once it holds that much; then
 * resumed here: the time from `resume()` to its first dispatch (the snapshot read and decoded,
 * the entries after it folded), and the resumed transcript checked line by line.
 */
async function bigTranscript(dir: string): Promise<void> {
  const path = join(dir, 'big.db');
  const target = Math.ceil((BIG_MB * 1024 * 1024) / (PAD.length + 10));
  const started = performance.now();
  const reached = await new Promise<number>((done, fail) => {
    const child = spawn(process.execPath, ['--expose-gc', process.argv[1] as string], {
      env: { ...process.env, BENCH_ONLY: 'transcript-child', BENCH_TRANSCRIPT_DB: path },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let last = 0;
    let buffer = '';
    child.stdout.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
      const lines = buffer.split('\n');
      buffer = lines.pop() ?? '';
      for (const line of lines) {
        const n = Number(line);
        if (Number.isSafeInteger(n)) last = n;
      }
      if (last >= target && !child.killed) child.kill('SIGKILL');
    });
    child.once('error', fail);
    child.once('exit', (_code, signal) =>
      signal === 'SIGKILL' ? done(last) : fail(new Error('the big transcript child exited')),
    );
  });
  const runSeconds = (performance.now() - started) / 1000;
  const store = createSqliteStore({ path });
  let firstDispatch = 0;
  let resumedAt = 0;
  const begin = performance.now();
  const result = await bigOrchestrator(store, (n) => {
    if (resumedAt === 0) {
      resumedAt = n;
      firstDispatch = performance.now() - begin;
    }
    return true;
  }).resume('big');
  const lines = result.state.projection.lines;
  let identical = lines[0] === 'begin';
  for (let i = 1; i < lines.length && identical; i++) {
    identical = lines[i] === `${i % 2 === 1 ? 'a' : 'b'}:${i}:${PAD}`;
  }
  const bytes = lines.reduce((n, line) => n + line.length, 0);
  await store.close();
  console.log(
    `\nA ${(bytes / 1024 / 1024).toFixed(0)} MB transcript on SQLite ('sync'): ${reached.toLocaleString('en')}+ dispatches in ${runSeconds.toFixed(1)} s, SIGKILLed; resumed in a new process, ${firstDispatch.toFixed(0)} ms from resume() to its first dispatch (snapshot read and decoded, entries folded); the resumed transcript ${identical && lines.length === result.dispatchCount + 1 ? 'is identical' : 'DIFFERS'} line by line (${lines.length.toLocaleString('en')} lines).`,
  );
}

/** The rows of one store: with entries up to DISPATCHES, whole checkpoints up to 1,000. */
async function storeRows(name: string, newStore: () => ConversationStore): Promise<Row[]> {
  return [
    await measure(`${name}, entries`, newStore, DISPATCHES, {}),
    await measure(`${name}, whole checkpoints`, newStore, WHOLE_DISPATCHES, {
      incremental: false,
    }),
  ];
}

/** A real PostgreSQL 15 (fsync on, synchronous_commit on), started and stopped here. */
async function postgresRows(): Promise<Row[]> {
  const server = await startPostgres();
  try {
    return await storeRows('PostgreSQL 15', () =>
      createPostgresStore({ connectionString: server.connectionString }),
    );
  } finally {
    await server.stop();
  }
}

/**
 * A real Redis 7 with its AOF on and `appendfsync always` (every acknowledged write on disk),
 * started and stopped here; then one with no persistence, entries only: the store's own cost
 * without the disk's flush, whose latency moves with the neighbours' load.
 */
async function redisRows(): Promise<Row[]> {
  const rows: Row[] = [];
  const durable = await startRedis({ aof: true, appendfsync: 'always' });
  try {
    rows.push(
      ...(await storeRows('Redis 7 (AOF, appendfsync always)', () =>
        createRedisStore({ url: durable.url }),
      )),
    );
  } finally {
    await durable.stop();
  }
  const volatile = await startRedis();
  try {
    rows.push(
      await measure(
        'Redis 7 (no persistence), entries',
        () => createRedisStore({ url: volatile.url }),
        DISPATCHES,
        {},
      ),
    );
  } finally {
    await volatile.stop();
  }
  return rows;
}

/** The targets for one row with entries: cost and bytes at the last point vs at 50. */
function verdict(row: Row): string {
  const cost = (row.ms[row.ms.length - 1] as number) / (row.ms[0] as number);
  const bytes = (row.bytes[row.bytes.length - 1] as number) / (row.bytes[0] as number);
  const costMet = cost <= 1.3;
  const bytesMet = bytes >= 0.8 && bytes <= 1.2;
  return `| ${row.name} | ${cost.toFixed(2)}× (${costMet ? 'met' : 'MISSED'}) | ${bytes.toFixed(2)}× (${bytesMet ? 'met' : 'MISSED'}) |`;
}

/** Prints the table (`BENCH_ONLY=transcript`). */
export async function transcriptTable(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-transcript-'));
  const loadStart = loadavg()[0] ?? 0;
  let n = 0;
  const sqlite = () => createSqliteStore({ path: join(dir, `t${++n}.db`) });
  try {
    const rows: Row[] = [];
    rows.push(...(await storeRows('SQLite', sqlite)));
    rows.push(...(await storeRows('memory', () => createMemoryStore())));
    const skipped: string[] = [];
    if (hasPostgres()) rows.push(...(await postgresRows()));
    else skipped.push('PostgreSQL (/usr/lib/postgresql/15/bin not installed)');
    if (hasRedisServer()) rows.push(...(await redisRows()));
    else skipped.push('Redis (redis-server not installed)');
    console.log(
      `\n### Long conversations: a transcript (1 KB per dispatch), durability 'sync' (issue 41)\n`,
    );
    console.log(
      `Wall time, medians of ${ROUNDS} conversations per row; load average ${loadStart.toFixed(1)} at the start, ${loadavg()[0]?.toFixed(1)} at the end.\n`,
    );
    console.log(
      `| store | ms per dispatch at ${AT.map((a) => a.toLocaleString('en')).join(' / ')} | at ${DISPATCHES.toLocaleString('en')} vs at 50 | bytes written per dispatch at ${AT.map((a) => a.toLocaleString('en')).join(' / ')} | at ${DISPATCHES.toLocaleString('en')} vs at 50 |`,
    );
    console.log('|---|---:|---:|---:|---:|');
    for (const row of rows) {
      // A whole-checkpoint row stops at 1,000: its ratio is at its last point, and says so.
      const last = row.ms.findLastIndex((x) => !Number.isNaN(x));
      const at = last === AT.length - 1 ? '' : ` at ${(AT[last] as number).toLocaleString('en')}`;
      const ratio = (xs: number[], digits: number) =>
        `${cell((xs[last] as number) / (xs[0] as number), digits)}×${at}`;
      console.log(
        `| ${row.name} | ${row.ms.map((x) => cell(x, 3)).join(' / ')} | ${ratio(row.ms, 2)} | ${row.bytes.map((x) => cell(x, 0)).join(' / ')} | ${ratio(row.bytes, 2)} |`,
      );
    }
    for (const s of skipped) console.log(`| ${s}: skipped | | | | |`);
    console.log(
      `\nThe targets (issue 41), rows with entries: the cost of dispatch ${DISPATCHES.toLocaleString('en')} at most 1.3× that of dispatch 50; bytes written per dispatch within ±20% from 50 to ${DISPATCHES.toLocaleString('en')}.\n`,
    );
    console.log(
      `| store | cost, ${DISPATCHES.toLocaleString('en')} vs 50 | bytes per dispatch, ${DISPATCHES.toLocaleString('en')} vs 50 |`,
    );
    console.log('|---|---:|---:|');
    for (const row of rows) if (row.name.endsWith(', entries')) console.log(verdict(row));
    if (BIG_MB > 0) await bigTranscript(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
