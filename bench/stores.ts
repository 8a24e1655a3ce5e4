/**
 * Conversation stores, side by side in one run (`npm run bench`, or `BENCH_ONLY=stores`). Stores
 * wait on the disk (fsync), so these rows use wall time, not the CPU clock of the other tables;
 * files live in the OS temp directory. Medians of `BENCH_STORE_ROUNDS` rounds (default 5).
 *
 * Each store adds its rows as a function below and a line in `storesTables()`; its floor is that
 * database's own bare write measured in the same run.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import type { Checkpoint, ConversationStore, Lease } from '../src/core/spi/store.ts';
import { ConversationOrchestrator, type Message, maxDispatches, roundRobin } from '../src/index.ts';
import { createSqliteStore, type SqliteStoreOptions } from '../src/stores/sqlite/index.ts';

const ROUNDS = Number(process.env.BENCH_STORE_ROUNDS ?? 5);
const OWNER = 'bench.invalid/1/bench';
/** A checkpoint's state in these rows: about 1 KB of JSON, as a short conversation's projection. */
const STATE_PAD = 'x'.repeat(1_000);

const median = (xs: readonly number[]) =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

const checkpoint = (id: string, seq: number, fields: Partial<Checkpoint> = {}): Checkpoint => ({
  conversationId: id,
  orchestrator: 'bench',
  status: 'running',
  seq,
  dispatchCount: seq - 1,
  state: JSON.stringify({ seq, pad: STATE_PAD }),
  ...fields,
});

/** A table's heading and header: the first column text, the others right-aligned numbers. */
function tableHead(title: string, columns: string): void {
  console.log(`\n### ${title}\n`);
  console.log(columns);
  const numbers = columns.split('|').length - 3;
  console.log(`|---|${'---:|'.repeat(numbers)}`);
}

function withDir<T>(run: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-stores-'));
  return run(dir).finally(() => rmSync(dir, { recursive: true, force: true }));
}

async function created(store: ConversationStore, id: string): Promise<Lease> {
  const outcome = await store.create(checkpoint(id, 1), OWNER, 600_000);
  if (!outcome.created) throw new Error(`bench: ${id} exists`);
  return outcome.lease;
}

/** Commits `commits` checkpoints of one conversation, each awaited; µs per commit. */
async function storeCommitUs(store: ConversationStore, id: string, commits: number) {
  let lease = await created(store, id);
  const t0 = performance.now();
  for (let seq = 2; seq <= commits + 1; seq++) {
    const outcome = await store.commit(checkpoint(id, seq), lease, 600_000);
    if (!outcome.ok) throw new Error(`bench: commit refused (${outcome.reason})`);
    lease = outcome.lease;
  }
  return ((performance.now() - t0) * 1000) / commits;
}

/** The floor: a bare better-sqlite3 INSERT OR REPLACE of the same row, one transaction each. */
function floorCommitUs(path: string, synchronous: 'FULL' | 'NORMAL', commits: number): number {
  const db = new Database(path);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${synchronous}`);
    db.exec(
      'CREATE TABLE conversations (id TEXT PRIMARY KEY, orchestrator TEXT, status TEXT, seq INTEGER, dispatch_count INTEGER, state TEXT, updated_at INTEGER)',
    );
    const put = db.prepare('INSERT OR REPLACE INTO conversations VALUES (?, ?, ?, ?, ?, ?, ?)');
    const write = db.transaction((seq: number) => {
      const c = checkpoint('floor', seq);
      put.run(
        c.conversationId,
        c.orchestrator,
        c.status,
        c.seq,
        c.dispatchCount,
        c.state,
        Date.now(),
      );
    });
    write(1);
    const t0 = performance.now();
    for (let seq = 2; seq <= commits + 1; seq++) write(seq);
    return ((performance.now() - t0) * 1000) / commits;
  } finally {
    db.close();
  }
}

async function sqlitePerCommit(): Promise<void> {
  tableHead(
    'SQLite store: one conversation committing, against a bare better-sqlite3 write (µs / commit, wall time)',
    '| synchronous | commits / round | store | floor (bare INSERT OR REPLACE) | × floor |',
  );
  for (const synchronous of ['FULL', 'NORMAL'] as const) {
    const commits = synchronous === 'FULL' ? 200 : 2_000;
    const store: number[] = [];
    const floor: number[] = [];
    await withDir(async (dir) => {
      for (let round = -1; round < ROUNDS; round++) {
        // Alternate, so both see the same neighbours; round -1 warms up.
        const f = floorCommitUs(join(dir, `floor-${round}.db`), synchronous, commits);
        const s = createSqliteStore({ path: join(dir, `store-${round}.db`), synchronous });
        const us = await storeCommitUs(s, 'one', commits);
        await s.close();
        if (round >= 0) {
          floor.push(f);
          store.push(us);
        }
      }
    });
    const [m, f] = [median(store), median(floor)];
    console.log(
      `| ${synchronous} | ${commits.toLocaleString('en')} | ${m.toFixed(1)} | ${f.toFixed(1)} | ${(m / f).toFixed(2)} |`,
    );
  }
}

/** `conversations` conversations committing `commits` times each, all at once; commits / s. */
async function concurrentCommitsPerSecond(
  options: SqliteStoreOptions,
  conversations: number,
  commits: number,
): Promise<number> {
  const store = createSqliteStore(options);
  try {
    const ids = Array.from({ length: conversations }, (_, i) => `c${i}`);
    const leases = await Promise.all(ids.map((id) => created(store, id)));
    const t0 = performance.now();
    await Promise.all(
      ids.map(async (id, i) => {
        let lease = leases[i] as Lease;
        for (let seq = 2; seq <= commits + 1; seq++) {
          const outcome = await store.commit(checkpoint(id, seq), lease, 600_000);
          if (!outcome.ok) throw new Error(`bench: commit refused (${outcome.reason})`);
          lease = outcome.lease;
        }
      }),
    );
    return (conversations * commits * 1000) / (performance.now() - t0);
  } finally {
    await store.close();
  }
}

/**
 * A table of two workloads measured one after the other in each of `ROUNDS` rounds, in one temp
 * directory: `title` and `columns` (the first column text, the others numbers), then the rows
 * `rows` makes of the two medians.
 */
async function twoWorkloads(
  title: string,
  columns: string,
  measure: (dir: string, round: number) => Promise<readonly [number, number]>,
  rows: (first: number, second: number) => readonly string[],
): Promise<void> {
  tableHead(title, columns);
  const first: number[] = [];
  const second: number[] = [];
  await withDir(async (dir) => {
    for (let round = 0; round < ROUNDS; round++) {
      const [a, b] = await measure(dir, round);
      first.push(a);
      second.push(b);
    }
  });
  for (const row of rows(median(first), median(second))) console.log(row);
}

function sqliteGroupCommit(): Promise<void> {
  return twoWorkloads(
    'SQLite store, group commit: 1,000 conversations committing at once against one alone (synchronous FULL, commits / s, wall time)',
    '| workload | commits / s | × one alone |',
    async (dir, round) => [
      await concurrentCommitsPerSecond({ path: join(dir, `alone-${round}.db`) }, 1, 200),
      await concurrentCommitsPerSecond({ path: join(dir, `many-${round}.db`) }, 1_000, 10),
    ],
    (a, m) => [
      `| 1 conversation, 200 commits each awaited | ${a.toFixed(0)} | 1.00 |`,
      `| 1,000 conversations at once, 10 commits each awaited | ${m.toFixed(0)} | ${(m / a).toFixed(1)} |`,
    ],
  );
}

/**
 * Conversations per the group-commit target: `conversations` at once, each of
 * `dispatches` dispatches by three desks whose responders take 1 ms, with `store` (durability
 * 'sync') or without one; dispatches / s.
 */
async function orchestratorDispatchesPerSecond(
  store: ConversationStore | undefined,
  conversations: number,
  dispatches: number,
  round: number,
): Promise<number> {
  const desks = ['london', 'new_york', 'tokyo'];
  const o = new ConversationOrchestrator<number, number>({
    name: 'bench_group_commit',
    ...(store === undefined ? {} : { store, durability: 'sync' as const }),
    responders: desks.map((name) => ({
      name,
      respond: (m: Message<number>) =>
        new Promise<Message<number>>((resolve) =>
          setTimeout(() => resolve({ sender: name, content: m.content + 1 }), 1),
        ),
    })),
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (_n, m) => m.content },
    termination: maxDispatches(dispatches),
  });
  const t0 = performance.now();
  const results = await Promise.all(
    Array.from({ length: conversations }, (_, i) =>
      o.run({ sender: 'market', content: 0 }, { conversationId: `g${round}-${i}` }),
    ),
  );
  const total = results.reduce((n, r) => n + r.dispatchCount, 0);
  return (total * 1000) / (performance.now() - t0);
}

function sqliteGroupCommitOrchestrator(): Promise<void> {
  return twoWorkloads(
    "SQLite store under an orchestrator: 1,000 conversations at once, responders taking 1 ms, durability 'sync', synchronous FULL, against no store (dispatches / s, wall time)",
    '| configuration | dispatches / s | share of no store |',
    async (dir, round) => {
      const none = await orchestratorDispatchesPerSecond(undefined, 1_000, 20, round);
      const store = createSqliteStore({ path: join(dir, `orchestrated-${round}.db`) });
      try {
        return [none, await orchestratorDispatchesPerSecond(store, 1_000, 20, round)];
      } finally {
        await store.close();
      }
    },
    (n, s) => [
      `| no store | ${n.toFixed(0)} | 100% |`,
      `| SQLite store, 'sync', FULL (every dispatch committed before the next) | ${s.toFixed(0)} | ${((100 * s) / n).toFixed(0)}% |`,
    ],
  );
}

/** Creates and ends `count` conversations, 1,000 at once. */
async function endMany(store: ConversationStore, prefix: string, count: number): Promise<void> {
  for (let start = 0; start < count; start += 1_000) {
    await Promise.all(
      Array.from({ length: Math.min(1_000, count - start) }, async (_, i) => {
        const id = `${prefix}${start + i}`;
        const lease = await created(store, id);
        const ended = checkpoint(id, 2, { status: 'ended', result: '{"ending":"converged"}' });
        const outcome = await store.commit(ended, lease, 1);
        if (!outcome.ok) throw new Error(`bench: end refused (${outcome.reason})`);
      }),
    );
  }
}

/** The file's bytes once the WAL is checkpointed into it. */
function fileBytes(path: string): number {
  const db = new Database(path);
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
  return statSync(path).size;
}

async function sqliteBytes(): Promise<void> {
  tableHead(
    'SQLite store: bytes on disk (checkpoints replace, they do not append)',
    '| what | file bytes | per conversation |',
  );
  await withDir(async (dir) => {
    for (const commits of [10, 10_000]) {
      const path = join(dir, `bytes-${commits}.db`);
      const store = createSqliteStore({ path, synchronous: 'NORMAL' });
      let lease = await created(store, 'c');
      for (let seq = 2; seq <= commits + 1; seq++) {
        const outcome = await store.commit(checkpoint('c', seq), lease, 600_000);
        if (outcome.ok) lease = outcome.lease;
      }
      await store.close();
      const bytes = fileBytes(path);
      console.log(
        `| one conversation after ${commits.toLocaleString('en')} commits (~1 KB state) | ${bytes.toLocaleString('en')} | ${bytes.toLocaleString('en')} |`,
      );
    }
    const ENDED = Number(process.env.BENCH_STORE_ENDED ?? 100_000);
    const path = join(dir, 'ended.db');
    const store = createSqliteStore({ path, synchronous: 'NORMAL' });
    await endMany(store, 'a', ENDED);
    await store.close();
    const kept = fileBytes(path);
    console.log(
      `| ${ENDED.toLocaleString('en')} ended conversations, default retention (7 days: all kept) | ${kept.toLocaleString('en')} | ${(kept / ENDED).toFixed(0)} |`,
    );
    // Past retention: purged, and as many more ended and purged reuse the freed pages.
    const purging = createSqliteStore({ path, synchronous: 'NORMAL', retentionMs: 0 });
    const purged = await purging.purgeExpired();
    await endMany(purging, 'b', ENDED);
    await purging.purgeExpired();
    await purging.close();
    const after = fileBytes(path);
    console.log(
      `| the same file after purging them (${purged.toLocaleString('en')}), then ${ENDED.toLocaleString('en')} more ended and purged | ${after.toLocaleString('en')} | — |`,
    );
  });
}

/** Every store's rows, in this order. Other stores add their function here. */
export async function storesTables(): Promise<void> {
  console.log(`\n## Conversation stores (${ROUNDS} rounds, medians, wall time)`);
  await sqlitePerCommit();
  await sqliteGroupCommit();
  await sqliteGroupCommitOrchestrator();
  await sqliteBytes();
}
