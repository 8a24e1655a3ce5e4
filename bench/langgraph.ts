/**
 * Against LangGraph.js (`npm run bench`, or `BENCH_ONLY=langgraph`): durable steps per second on
 * one workload, side by side in one run. The workload is the three-desk one of the issue: three
 * desks quote in turn (round robin), each step moves a desk's quote toward the others' mean, a
 * thread is 100 steps. LangGraph.js 1.7.3 runs it as a StateGraph (three nodes in a cycle) with its
 * own `SqliteSaver` (its defaults: WAL, better-sqlite3's `synchronous=FULL`) and `PostgresSaver`;
 * this library runs it as a ConversationOrchestrator with `createSqliteStore()` (WAL,
 * `synchronous=FULL`, durability `'sync'`: every dispatch committed before the next responder) and
 * `createPostgresStore()`. Both commit every step before the next one; both wait on the same disk
 * or the same PostgreSQL server (started here). Rows for one thread at a time and for `THREADS`
 * at once (a service's load: where group commit shares fsyncs); wall time, medians of `ROUNDS`.
 *
 * And the long-conversation transcript of bench/transcript.ts (`BENCH_ONLY=langgraph-transcript`,
 * issue 41): a message of 1 KB per step, the state a list of every message so far, two nodes in
 * turn, every step committed before the next on both sides (LangGraph's `durability: 'sync'`, this
 * library's `'sync'`); the cost of one step at step 50 and at step 1,000, each the median of the
 * 50 steps around it, then over `ROUNDS` threads.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import {
  ConversationOrchestrator,
  type ConversationStore,
  type Message,
  maxDispatches,
  roundRobin,
} from '../src/index.ts';
import { createPostgresStore } from '../src/stores/postgres/index.ts';
import { createSqliteStore } from '../src/stores/sqlite/index.ts';
import { hasPostgres, startPostgres } from '../test/helpers/postgres.ts';
import { median as medianOf, PAD, run as runTranscript, window } from './transcript.ts';

const STEPS = 100;
const THREADS = Number(process.env.BENCH_LANGGRAPH_THREADS ?? 50);
const ROUNDS = Number(process.env.BENCH_LANGGRAPH_ROUNDS ?? 3);
const DESKS = ['london', 'new_york', 'tokyo'] as const;

const median = (xs: readonly number[]) =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

/** The step both sides run: desk `i` moves 1% toward the others' mean. */
function quote(quotes: readonly number[], i: number): number {
  const mine = quotes[i] as number;
  const mean = ((quotes[0] as number) + (quotes[1] as number) + (quotes[2] as number) - mine) / 2;
  return mine + (mean - mine) * 0.01;
}

// --- LangGraph.js -------------------------------------------------------------------------------

const DeskState = Annotation.Root({
  quotes: Annotation<number[]>({ reducer: (_old, next) => next, default: () => [100, 110, 90] }),
  step: Annotation<number>({ reducer: (_old, next) => next, default: () => 0 }),
});

function langgraph(checkpointer: BaseCheckpointSaver) {
  const node = (i: number) => async (s: typeof DeskState.State) => {
    const quotes = [...s.quotes];
    quotes[i] = quote(quotes, i);
    return { quotes, step: s.step + 1 };
  };
  return new StateGraph(DeskState)
    .addNode('london', node(0))
    .addNode('new_york', node(1))
    .addNode('tokyo', node(2))
    .addEdge(START, 'london')
    .addConditionalEdges('london', (s) => (s.step >= STEPS ? END : 'new_york'))
    .addConditionalEdges('new_york', (s) => (s.step >= STEPS ? END : 'tokyo'))
    .addConditionalEdges('tokyo', (s) => (s.step >= STEPS ? END : 'london'))
    .compile({ checkpointer });
}

function langgraphSide(checkpointer: BaseCheckpointSaver): Side {
  return {
    start: () => {
      const graph = langgraph(checkpointer);
      return async (threadId) => {
        const result = await graph.invoke(
          {},
          { configurable: { thread_id: threadId }, recursionLimit: STEPS * 2 },
        );
        return result.step as number;
      };
    },
    short: (steps) => `LangGraph ran ${steps} steps`,
  };
}

// --- this library -------------------------------------------------------------------------------

function orchestrator(store: ConversationStore) {
  return new ConversationOrchestrator<number[], number>({
    name: 'bench_langgraph',
    store,
    durability: 'sync',
    responders: DESKS.map((name, i) => ({
      name,
      respond: async (_m, state): Promise<Message<number>> => ({
        sender: name,
        content: quote(state.projection, i),
      }),
    })),
    turnPolicy: roundRobin(),
    projection: {
      initial: () => [100, 110, 90],
      fold: (q, m) => {
        const next = [...q];
        next[DESKS.indexOf(m.sender as (typeof DESKS)[number])] = m.content;
        return next;
      },
    },
    termination: maxDispatches(STEPS),
  });
}

/** This library's side: a conversation's steps are its committed dispatches. */
function ourSide(store: ConversationStore): Side {
  return {
    start: () => {
      const o = orchestrator(store);
      return async (conversationId) =>
        (await o.run({ sender: 'market', content: 0 }, { conversationId })).dispatchCount;
    },
    short: (steps) => `ran ${steps} dispatches`,
  };
}

// --- the table ----------------------------------------------------------------------------------

/**
 * One side of a row: `start()` makes its runner (a compiled graph, an orchestrator), which runs
 * one thread of STEPS steps to its end and resolves with the steps it ran; `short` says what a
 * thread that ran fewer did.
 */
interface Side {
  readonly start: () => (threadId: string) => Promise<number>;
  readonly short: (steps: number) => string;
}

/** Durable steps per second of `threads` threads of `side` at once (round `round`'s ids). */
async function stepsPerSecond(side: Side, threads: number, round: number): Promise<number> {
  const thread = side.start();
  const t0 = performance.now();
  const ran = await Promise.all(
    Array.from({ length: threads }, (_, t) => thread(`r${round}-t${t}`)),
  );
  const seconds = (performance.now() - t0) / 1000;
  const steps = ran.reduce((n, s) => n + s, 0);
  if (steps < threads * STEPS) throw new Error(`bench: ${side.short(steps)}`);
  return steps / seconds;
}

interface Pair {
  readonly database: string;
  readonly ours: Side;
  readonly theirs: Side;
}

async function row(pair: Pair, threads: number): Promise<void> {
  const ours: number[] = [];
  const theirs: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    // Alternated, so that a noisy moment of the machine falls on both.
    theirs.push(await stepsPerSecond(pair.theirs, threads, round + 1_000 * threads));
    ours.push(await stepsPerSecond(pair.ours, threads, round + 1_000 * threads));
  }
  const [a, b] = [median(ours), median(theirs)];
  console.log(
    `| ${pair.database} | ${threads} | ${b.toFixed(0)} | ${a.toFixed(0)} | ${(a / b).toFixed(1)}x |`,
  );
}

export async function langgraphTable(): Promise<void> {
  console.log(
    `\n### Against LangGraph.js 1.7.3: durable steps per second, three desks, ${STEPS}-step threads (every step committed before the next; wall time, median of ${ROUNDS})\n`,
  );
  console.log(
    '| database | threads at once | LangGraph.js + its saver | this library + its store | ratio |',
  );
  console.log('|---|---:|---:|---:|---:|');
  await onEachDatabase('bench-langgraph-', async (database, saver, store) => {
    const pair: Pair = {
      database:
        database === 'sqlite'
          ? 'SQLite (WAL, synchronous FULL)'
          : 'PostgreSQL 15 (local, synchronous_commit on)',
      ours: ourSide(store),
      theirs: langgraphSide(saver),
    };
    await row(pair, 1);
    await row(pair, THREADS);
  });
}

/**
 * Calls `rows` with LangGraph's saver and this library's store on SQLite (files in a fresh folder
 * named from `prefix`), then on PostgreSQL (a server started here) when this machine has one, and
 * closes both after it (the SQLite saver is left to the process's end, as before).
 */
async function onEachDatabase(
  prefix: string,
  rows: (
    database: 'sqlite' | 'postgres',
    saver: BaseCheckpointSaver,
    store: ConversationStore,
  ) => Promise<void>,
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  try {
    const saver = SqliteSaver.fromConnString(join(dir, 'langgraph.db'));
    const store = createSqliteStore({ path: join(dir, 'ours.db') });
    await rows('sqlite', saver, store);
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  if (!hasPostgres()) {
    console.log('| PostgreSQL | (no PostgreSQL on this machine) | | | |');
    return;
  }
  const server = await startPostgres();
  try {
    const saver = PostgresSaver.fromConnString(server.connectionString);
    await saver.setup();
    const store = createPostgresStore({ connectionString: server.connectionString });
    await rows('postgres', saver, store);
    await store.close();
    await saver.end();
  } finally {
    await server.stop();
  }
}

// --- the transcript (issue 41) ------------------------------------------------------------------

/** The points measured: step 50 and step 1,000 (each the median of the 50 steps around it). */
const TRANSCRIPT_AT = [50, 1_000] as const;
/** Steps per thread: past the last point, so that its window is whole on both sides. */
const TRANSCRIPT_STEPS = 1_025;

const TranscriptState = Annotation.Root({
  // A growing list of messages: each step's update appended, as LangGraph's messages reducer does.
  lines: Annotation<string[]>({ reducer: (old, next) => old.concat(next), default: () => [] }),
});

function transcriptGraph(checkpointer: BaseCheckpointSaver) {
  // The same line as this library's responders write: `${name}:${lines so far}:${PAD}`.
  const node = (name: string) => async (s: typeof TranscriptState.State) => ({
    lines: [`${name}:${s.lines.length}:${PAD}`],
  });
  const next = (to: string) => (s: typeof TranscriptState.State) =>
    s.lines.length > TRANSCRIPT_STEPS ? END : to;
  return new StateGraph(TranscriptState)
    .addNode('a', node('a'))
    .addNode('b', node('b'))
    .addEdge(START, 'a')
    .addConditionalEdges('a', next('b'))
    .addConditionalEdges('b', next('a'))
    .compile({ checkpointer });
}

/** One LangGraph thread of TRANSCRIPT_STEPS steps; the wall time of each (index = step - 1). */
async function langgraphTranscript(checkpointer: BaseCheckpointSaver, thread: string) {
  const graph = transcriptGraph(checkpointer);
  const times: number[] = [];
  let last = performance.now();
  const stream = await graph.stream(
    { lines: ['begin'] },
    {
      configurable: { thread_id: thread },
      streamMode: 'updates',
      durability: 'sync',
      recursionLimit: TRANSCRIPT_STEPS + 10,
    },
  );
  for await (const _update of stream) {
    const now = performance.now();
    times.push(now - last);
    last = now;
  }
  if (times.length !== TRANSCRIPT_STEPS) {
    throw new Error(`bench: LangGraph ran ${times.length} steps, not ${TRANSCRIPT_STEPS}`);
  }
  const state = await graph.getState({ configurable: { thread_id: thread } });
  const lines = (state.values as typeof TranscriptState.State).lines;
  if (
    lines.length !== TRANSCRIPT_STEPS + 1 ||
    lines[TRANSCRIPT_STEPS] !== `a:${TRANSCRIPT_STEPS}:${PAD}`
  ) {
    throw new Error(
      `bench: LangGraph's stored transcript has ${lines.length} lines, not ${TRANSCRIPT_STEPS + 1}`,
    );
  }
  return times;
}

/** One conversation of this library, the same transcript; the wall time of each dispatch. */
async function ourTranscript(store: ConversationStore) {
  const times = await runTranscript(store, TRANSCRIPT_STEPS, {}, () => true);
  if (times.length !== TRANSCRIPT_STEPS) {
    throw new Error(`bench: ran ${times.length} dispatches, not ${TRANSCRIPT_STEPS}`);
  }
  return times;
}

/** ms per step at each of TRANSCRIPT_AT: the median of its window, then over the rounds. */
function atPoints(rounds: readonly number[][]): number[] {
  return TRANSCRIPT_AT.map((at) => {
    const [from, to] = window(at, TRANSCRIPT_STEPS);
    return medianOf(rounds.map((times) => medianOf(times.slice(from - 1, to))));
  });
}

async function transcriptRow(
  database: string,
  ours: () => Promise<number[]>,
  theirs: (round: number) => Promise<number[]>,
): Promise<void> {
  const a: number[][] = [];
  const b: number[][] = [];
  for (let round = 0; round < ROUNDS; round++) {
    // Alternated, so that a noisy moment of the machine falls on both.
    b.push(await theirs(round));
    a.push(await ours());
  }
  const [ours50, ours1k] = atPoints(a) as [number, number];
  const [theirs50, theirs1k] = atPoints(b) as [number, number];
  console.log(
    `| ${database} | ${theirs50.toFixed(3)} / ${theirs1k.toFixed(3)} | ${ours50.toFixed(3)} / ${ours1k.toFixed(3)} | ${(ours50 / theirs50).toFixed(3)} | ${(ours1k / theirs1k).toFixed(3)} |`,
  );
}

/** Prints the transcript table (`BENCH_ONLY=langgraph-transcript`). */
export async function langgraphTranscriptTable(): Promise<void> {
  console.log(
    `\n### Against LangGraph.js 1.7.3: a transcript (1 KB per step, the state the list of every message), every step committed before the next; ms per step at step 50 / 1,000 (median of the 50 steps around it, then of ${ROUNDS} threads; wall time)\n`,
  );
  console.log(
    '| database | LangGraph.js + its saver | this library + its store | ours / theirs at 50 | ours / theirs at 1,000 |',
  );
  console.log('|---|---:|---:|---:|---:|');
  await onEachDatabase('bench-langgraph-transcript-', (database, saver, store) =>
    transcriptRow(
      database === 'sqlite'
        ? 'SQLite (WAL, synchronous FULL): SqliteSaver vs createSqliteStore()'
        : 'PostgreSQL 15 (local, synchronous_commit on): PostgresSaver vs createPostgresStore()',
      () => ourTranscript(store),
      (round) => langgraphTranscript(saver, `transcript-${round}`),
    ),
  );
}
