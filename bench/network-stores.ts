/**
 * The PostgreSQL and Redis stores' cost per commit against their database's own floor, in the
 * same run on the same server: a bare `pg` `INSERT … ON CONFLICT DO UPDATE` of one row, a bare
 * Redis `SET` of one key, each with the same state text. One conversation committing in sequence
 * (each commit awaited, as `durability: 'sync'` does), and 1,000 conversations committing at once
 * (group commit on and off). The servers are started here (test/helpers), on this machine's
 * loopback; the table is skipped when PostgreSQL 15 or redis-server is not installed.
 *
 * Wall time (these wait for the server), medians of ROUNDS rounds; variants alternate within each
 * round so they see the same neighbours' load.
 */
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import pg from 'pg';
import type { Checkpoint, ConversationStore, Lease } from '../src/core/spi/store.ts';
import { createPostgresStore } from '../src/stores/postgres/index.ts';
import { createRedisStore } from '../src/stores/redis/index.ts';
import { hasPostgres, startPostgres } from '../test/helpers/postgres.ts';
import { hasRedisServer, startRedis } from '../test/helpers/redis.ts';

const COMMITS = Number(process.env.BENCH_STORE_COMMITS ?? 400);
const CONCURRENT = 1_000;
/** A checkpoint of about 1 KB, what a short conversation's state weighs. */
const STATE = JSON.stringify({ projection: { quotes: [1.25, 1.5, 1.75] }, pad: 'x'.repeat(960) });

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

const checkpoint = (id: string, seq: number): Checkpoint => ({
  conversationId: id,
  orchestrator: 'bench',
  status: 'running',
  seq,
  dispatchCount: seq - 1,
  state: STATE,
});

/** A conversation of the store, created once; `time(n)` commits it n times in sequence. */
async function singleConversation(
  store: ConversationStore,
  id: string,
): Promise<(n: number) => Promise<number>> {
  const created = await store.create(checkpoint(id, 1), 'bench.example/1/bench', 600_000);
  if (!created.created) throw new Error(`bench: ${id} exists`);
  let lease: Lease = created.lease;
  let seq = 1;
  return async (n) => {
    const start = performance.now();
    for (let i = 0; i < n; i++) {
      const outcome = await store.commit(checkpoint(id, ++seq), lease, 600_000);
      if (!outcome.ok) throw new Error(`bench: commit refused (${outcome.reason})`);
      lease = outcome.lease;
    }
    return ((performance.now() - start) * 1000) / n;
  };
}

/** CONCURRENT conversations, each committed once per call, all at once: µs per commit. */
async function manyConversations(
  store: ConversationStore,
  prefix: string,
): Promise<() => Promise<number>> {
  const held = await Promise.all(
    Array.from({ length: CONCURRENT }, async (_, i) => {
      const id = `${prefix}-${i}`;
      const created = await store.create(checkpoint(id, 1), 'bench.example/1/bench', 600_000);
      if (!created.created) throw new Error(`bench: ${id} exists`);
      return { id, lease: created.lease, seq: 1 };
    }),
  );
  return async () => {
    const start = performance.now();
    await Promise.all(
      held.map(async (h) => {
        const outcome = await store.commit(checkpoint(h.id, ++h.seq), h.lease, 600_000);
        if (!outcome.ok) throw new Error(`bench: commit refused (${outcome.reason})`);
      }),
    );
    return ((performance.now() - start) * 1000) / CONCURRENT;
  };
}

interface Row {
  readonly label: string;
  readonly time: () => Promise<number>;
}

async function measure(rows: readonly Row[], rounds: number): Promise<number[]> {
  for (const row of rows) await row.time(); // warm-up
  const samples = rows.map(() => [] as number[]);
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < rows.length; i++) samples[i]?.push(await (rows[i] as Row).time());
  }
  return samples.map(median);
}

const us = (v: number) => `${v.toFixed(0)} µs`;

async function postgresRows(rounds: number): Promise<void> {
  const server = await startPostgres();
  const pool = new pg.Pool({ connectionString: server.connectionString, max: 10 });
  pool.on('error', () => {});
  const grouped = createPostgresStore({ connectionString: server.connectionString });
  const alone = createPostgresStore({
    connectionString: server.connectionString,
    table: 'co_alone',
    groupCommit: false,
  });
  try {
    await pool.query('CREATE TABLE floor (id text PRIMARY KEY, state text NOT NULL)');
    const floor = async (n: number) => {
      const start = performance.now();
      for (let i = 0; i < n; i++) {
        await pool.query({
          text: 'INSERT INTO floor (id, state) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state',
          values: ['one', STATE],
        });
      }
      return ((performance.now() - start) * 1000) / n;
    };
    const single = await singleConversation(grouped, 'single');
    const singleAlone = await singleConversation(alone, 'single');
    const [f, s, a] = await measure(
      [
        { label: 'floor', time: () => floor(COMMITS) },
        { label: 'store', time: () => single(COMMITS) },
        { label: 'store alone', time: () => singleAlone(COMMITS) },
      ],
      rounds,
    );
    const manyGrouped = await manyConversations(grouped, 'many');
    const manyAlone = await manyConversations(alone, 'many');
    const [g, n] = await measure(
      [
        { label: 'group', time: manyGrouped },
        { label: 'alone', time: manyAlone },
      ],
      rounds,
    );
    console.log(
      `| PostgreSQL 15 (fsync on, synchronous_commit on) | one conversation, commits in sequence | ${us(s as number)} (group commit on), ${us(a as number)} (off) | ${us(f as number)} bare INSERT … ON CONFLICT DO UPDATE | ${((s as number) / (f as number)).toFixed(2)}x, ${((a as number) / (f as number)).toFixed(2)}x |`,
    );
    console.log(
      `| PostgreSQL 15 | ${CONCURRENT.toLocaleString('en')} conversations committing at once | ${us(g as number)} per commit with group commit, ${us(n as number)} without | | group commit ${((n as number) / (g as number)).toFixed(1)}x faster |`,
    );
  } finally {
    await grouped.close();
    await alone.close();
    await pool.end();
    await server.stop();
  }
}

async function redisRows(rounds: number, aof: boolean): Promise<void> {
  const server = await startRedis(aof ? { aof: true, appendfsync: 'always' } : {});
  const client = new Redis(server.url);
  const store = createRedisStore({ url: server.url });
  try {
    const floor = async (n: number) => {
      const start = performance.now();
      for (let i = 0; i < n; i++) await client.set('floor', STATE);
      return ((performance.now() - start) * 1000) / n;
    };
    const single = await singleConversation(store, 'single');
    const [f, s] = await measure(
      [
        { label: 'floor', time: () => floor(COMMITS) },
        { label: 'store', time: () => single(COMMITS) },
      ],
      rounds,
    );
    const many = await manyConversations(store, 'many');
    const [m] = await measure([{ label: 'many', time: many }], rounds);
    const mode = aof ? 'AOF, appendfsync always' : 'no persistence';
    console.log(
      `| Redis 7 (${mode}) | one conversation, commits in sequence | ${us(s as number)} | ${us(f as number)} bare SET | ${((s as number) / (f as number)).toFixed(2)}x |`,
    );
    console.log(
      `| Redis 7 (${mode}) | ${CONCURRENT.toLocaleString('en')} conversations committing at once | ${us(m as number)} per commit (pipelined on one connection) | | |`,
    );
  } finally {
    client.disconnect();
    await store.close();
    await server.stop();
  }
}

/** Prints the table (or why it is skipped). */
export async function networkStoresTable(rounds: number): Promise<void> {
  console.log('\n### PostgreSQL and Redis stores: per commit against the database floor\n');
  console.log(
    `Wall time per commit (~1 KB state), medians of ${rounds} rounds of ${COMMITS} sequential commits (or ${CONCURRENT.toLocaleString('en')} at once); servers on this machine's loopback.\n`,
  );
  console.log('| database | workload | store | floor | store / floor |');
  console.log('|---|---|---:|---:|---:|');
  if (hasPostgres()) await postgresRows(rounds);
  else console.log('| PostgreSQL | skipped: /usr/lib/postgresql/15/bin not installed | | | |');
  if (hasRedisServer()) {
    await redisRows(rounds, true);
    await redisRows(rounds, false);
  } else {
    console.log('| Redis | skipped: redis-server not installed | | | |');
  }
}
