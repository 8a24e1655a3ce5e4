/**
 * Long conversations (issue 41; `npm run bench`, or `BENCH_ONLY=transcript`): a transcript
 * conversation, two responders in round robin each adding a message of 1 KB that the projection
 * keeps (a list growing by one message per dispatch), committed with `durability: 'sync'`.
 *
 * Per store, side by side in one run: the cost of a dispatch (wall time between two listener
 * calls, median over a window of 50 dispatches) at dispatch 50, 1,000 and 5,000, and the bytes
 * written per dispatch there (the entry, plus the share of the snapshot that later covered it:
 * snapshots amortized and counted; the conversation runs on until a snapshot covers the last
 * window, and its ending, one whole write per conversation, is not in any window). The same with whole checkpoints (`incremental: false`, the
 * way every commit was written before) up to dispatch 1,000, where it already costs 20× more.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
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
  type Message,
  maxDispatches,
  roundRobin,
  stopWhen,
} from '../src/index.ts';
import { createSqliteStore } from '../src/stores/sqlite/index.ts';

const DISPATCHES = Number(process.env.BENCH_TRANSCRIPT_DISPATCHES ?? 5_000);
const WHOLE_DISPATCHES = Math.min(DISPATCHES, 1_000);
const AT = [50, 1_000, DISPATCHES] as const;
const WINDOW = 50;
const PAD = 'x'.repeat(1_000);

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

interface Transcript {
  readonly lines: string[];
}

/** Runs one transcript conversation; the wall time of each dispatch (index = dispatch - 1). */
async function run(
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
    responders: ['a', 'b'].map((name) => ({
      name,
      respond: (_m: Message<string>, state) => ({
        sender: name,
        content: `${name}:${state.projection.lines.length}:${PAD}`,
      }),
    })),
    turnPolicy: roundRobin(),
    projection: {
      initial: (input) => ({ lines: [input.content] }),
      fold: (s, m) => {
        s.lines.push(m.content);
        return s;
      },
    },
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

const median = (xs: readonly number[]) =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

/** The window of dispatches around `at` (ending at the conversation's last). */
function window(at: number, last: number): [number, number] {
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

async function measure(
  name: string,
  newStore: () => ConversationStore,
  dispatches: number,
  checkpoints: CheckpointOptions,
): Promise<Row> {
  const written: Written = { entries: new Map(), bases: [] };
  const store = recording(newStore(), written);
  const last = AT.filter((at) => at <= dispatches).at(-1) as number;
  const [, lastMeasured] = window(last, dispatches);
  // Run until a snapshot covers the last window (a whole-checkpoint run writes none: it stops at
  // `dispatches`).
  const times = await run(
    store,
    dispatches,
    checkpoints,
    () => checkpoints.incremental === false || written.bases.some((b) => b.seq > lastMeasured + 1),
  );
  await store.close();
  const ms: number[] = [];
  const bytes: number[] = [];
  for (const at of AT) {
    if (at > dispatches) {
      ms.push(Number.NaN);
      bytes.push(Number.NaN);
      continue;
    }
    const [from, to] = window(at, dispatches);
    ms.push(median(times.slice(from - 1, to)));
    bytes.push(bytesPerDispatch(written, from, to));
  }
  return { name, ms, bytes };
}

const cell = (x: number, digits: number) => (Number.isNaN(x) ? '—' : x.toFixed(digits));

/** Prints the table (`BENCH_ONLY=transcript`). */
export async function transcriptTable(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-transcript-'));
  let n = 0;
  const sqlite = () => createSqliteStore({ path: join(dir, `t${++n}.db`) });
  try {
    const rows: Row[] = [];
    rows.push(await measure('SQLite, entries', sqlite, DISPATCHES, {}));
    rows.push(
      await measure('SQLite, whole checkpoints', sqlite, WHOLE_DISPATCHES, { incremental: false }),
    );
    rows.push(await measure('memory, entries', () => createMemoryStore(), DISPATCHES, {}));
    rows.push(
      await measure('memory, whole checkpoints', () => createMemoryStore(), WHOLE_DISPATCHES, {
        incremental: false,
      }),
    );
    console.log(
      `\n### Long conversations: a transcript (1 KB per dispatch), durability 'sync' (issue 41)\n`,
    );
    console.log(
      `| store | ms per dispatch at ${AT.map((a) => a.toLocaleString('en')).join(' / ')} | at ${DISPATCHES.toLocaleString('en')} vs at 50 | bytes written per dispatch at ${AT.map((a) => a.toLocaleString('en')).join(' / ')} | at ${DISPATCHES.toLocaleString('en')} vs at 50 |`,
    );
    console.log('|---|---:|---:|---:|---:|');
    for (const row of rows) {
      const lastMs = row.ms[row.ms.length - 1] as number;
      const lastBytes = row.bytes[row.bytes.length - 1] as number;
      console.log(
        `| ${row.name} | ${row.ms.map((x) => cell(x, 3)).join(' / ')} | ${cell(lastMs / (row.ms[0] as number), 2)}× | ${row.bytes.map((x) => cell(x, 0)).join(' / ')} | ${cell(lastBytes / (row.bytes[0] as number), 2)}× |`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
