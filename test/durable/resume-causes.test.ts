/**
 * What a resumed segment says of the one before it (`ConversationStart.resumed.cause`, the span's
 * `conversation.resume.cause` and `conversation.resume.dispatches_lost`), on the memory and SQLite
 * stores (issue 43, findings 4 and 5):
 * - a `resume()` by another orchestrator that reaches `acquire` (the id changed hands between its
 *   `get` and its `acquire`) leaves the crash mark of the conversation it took by mistake: the
 *   owner's `recover()` still says `crash`, re-runs the cut call with attempt 2, and counts lost
 *   exactly what it counts without that `resume()` (the holder's real crash is a SIGKILLed
 *   process on SQLite);
 * - a run aborted inside one of its steps (a responder aborting its own run synchronously, an
 *   abort from the projection's fold) is resumed as `abort`, not as a crash: the aborted segment
 *   ended its span, so no dispatch is lost, and the call it cut runs again with attempt 2.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  ConversationAbortedError,
  ConversationNotFoundError,
  type ConversationObserver,
  ConversationOrchestrator,
  type ConversationStart,
  type ConversationStore,
  createMemoryStore,
  type Durability,
  type Message,
  maxDispatches,
  roundRobin,
} from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import { createPostgresStore } from '../../src/stores/postgres/index.ts';
import { createRedisStore } from '../../src/stores/redis/index.ts';
import { createSqliteStore } from '../../src/stores/sqlite/index.ts';
import { type RunningPostgres, startPostgres } from '../helpers/postgres.ts';
import { type RunningRedis, startRedis } from '../helpers/redis.ts';
import { memoryTracing, restoreTracing } from '../helpers/tracing.ts';

const exec = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'resume-causes-'));
const opened: ConversationStore[] = [];
afterEach(restoreTracing);
afterAll(async () => {
  await Promise.all(opened.map((store) => store.close()));
  await Promise.all([postgres?.stop(), redis?.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

let files = 0;
const STORES: [string, () => ConversationStore][] = [
  ['memory', () => createMemoryStore()],
  ['sqlite', () => createSqliteStore({ path: join(dir, `s${++files}.db`) })],
];
// The network stores, for the abort mark (written back through an acquire by its own owner).
let postgres: RunningPostgres | undefined;
let redis: RunningRedis | undefined;
beforeAll(async () => {
  [postgres, redis] = await Promise.all([startPostgres(), startRedis()]);
}, 60_000);
const NETWORK_STORES: [string, () => ConversationStore][] = [
  [
    'postgres',
    () =>
      createPostgresStore({
        connectionString: (postgres as RunningPostgres).connectionString,
        table: `rc_${++files}`,
      }),
  ],
  ['redis', () => createRedisStore({ url: (redis as RunningRedis).url, prefix: `rc${++files}` })],
];
function open(make: () => ConversationStore): ConversationStore {
  const store = make();
  opened.push(store);
  return store;
}

type Calls = [key: string, attempt: number][];
const input: Message<number> = { sender: 'user', content: 1 };

/** The conversation of test/fixtures/crash-at-call.ts: orchestrator `alpha`, 6 dispatches. */
function alpha(
  store: ConversationStore,
  options: {
    calls?: Calls;
    observers?: ConversationObserver<number, number>[];
    durability?: Durability;
    name?: string;
    /** Called inside each responder call (synchronously), with the call's number. */
    onCall?: (n: number) => void;
    /** Called inside the fold of each answer (synchronously), with the answer's content. */
    onFold?: (content: number) => void;
  } = {},
) {
  const calls = options.calls ?? [];
  return new ConversationOrchestrator<number, number>({
    name: options.name ?? 'alpha',
    store,
    durability: options.durability ?? 'sync',
    ...(options.observers === undefined ? {} : { observers: options.observers }),
    responders: [
      {
        name: 'r',
        respond: (m, _s, context) => {
          calls.push([context.idempotencyKey, context.attempt]);
          options.onCall?.(calls.length);
          return { sender: 'r', content: m.content + 1 };
        },
      },
    ],
    turnPolicy: roundRobin(),
    projection: {
      initial: () => 0,
      fold: (sum, m) => {
        if (m.sender === 'r') options.onFold?.(m.content);
        return sum + m.content;
      },
    },
    termination: maxDispatches(6),
  });
}

/** Each segment's start, as the observers learn it. */
function starts<S = number, C = number>() {
  const seen: ConversationStart<C>[] = [];
  const observer: ConversationObserver<S, C> = {
    startConversation: (start) => {
      seen.push(start);
      return {};
    },
  };
  return { observer, seen };
}

/** The telemetry, exporting to memory: the conversation spans of `id`, in order. */
function telemetry() {
  const { exporter, provider } = memoryTracing();
  const observer = createConversationTelemetry({
    tracerProvider: provider,
    registry: new Registry(),
  }) as ConversationObserver<number, number>;
  const segments = (id: string): ReadableSpan[] =>
    exporter
      .getFinishedSpans()
      .filter(
        (span) =>
          span.attributes['conversation.segment'] !== undefined &&
          span.attributes['gen_ai.conversation.id'] === id,
      )
      .sort(
        (a, b) =>
          Number(a.attributes['conversation.segment']) -
          Number(b.attributes['conversation.segment']),
      );
  /** The dispatch counts its `conversation.dispatch` events tell. */
  const events = (span: ReadableSpan | undefined): number[] =>
    (span?.events ?? [])
      .filter((e) => e.name === 'conversation.dispatch')
      .map((e) => Number(e.attributes?.['conversation.dispatch.count']));
  return { observer, segments, events, provider };
}

/** What an uninterrupted run of `alpha` ends with. */
async function uninterrupted() {
  const result = await alpha(createMemoryStore()).run(input, { conversationId: 'u' });
  return { projection: result.state.projection, dispatchCount: result.dispatchCount };
}

/** A holder on this host that no run holds (this pid, a token nobody made): a dead one. */
const DEAD_OWNER = `${hostname().replace(/\//g, '_') || 'localhost'}/${process.pid}/crashed`;

/**
 * Conversation `id` of `alpha` whose holder died inside its third call, two dispatches committed:
 * on SQLite a child process SIGKILLed there; on the memory store (which no other process can
 * share) a run whose lease is held by a dead owner and whose third call never answers.
 */
async function crashedHolder(kind: string, store: ConversationStore, path: string, id: string) {
  if (kind === 'sqlite') {
    const child = await exec(
      process.execPath,
      ['--import', 'tsx', 'test/fixtures/crash-at-call.ts', path, id, '3'],
      { cwd: ROOT },
    ).then(
      () => 'exited',
      (error: { signal?: string }) => error.signal,
    );
    expect(child).toBe('SIGKILL');
    return;
  }
  const dead: ConversationStore = new Proxy(store, {
    get(target, key, receiver) {
      if (key === 'create')
        return (checkpoint: never, _owner: string, leaseMs: number) =>
          target.create(checkpoint, DEAD_OWNER, leaseMs);
      const value = Reflect.get(target, key, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  let calls = 0;
  const hung = new ConversationOrchestrator<number, number>({
    name: 'alpha',
    store: dead,
    responders: [
      {
        name: 'r',
        respond: (m) =>
          ++calls === 3 ? new Promise<never>(() => {}) : { sender: 'r', content: m.content + 1 },
      },
    ],
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (sum, m) => sum + m.content },
    termination: maxDispatches(6),
  });
  // It never settles on its own: its lease is taken over, and its next renewal refused.
  hung.run(input, { conversationId: id }).catch(() => undefined);
  while (calls < 3) await new Promise((r) => setTimeout(r, 5));
  expect((await store.get(id))?.dispatchCount).toBe(2);
}

describe.each(STORES)('%s: a resume() by another orchestrator racing recover()', (kind, make) => {
  /** Recovers `id` with `alpha`: the resumed segment's cause, its calls, its span. */
  async function recovered(store: ConversationStore, id: string) {
    const calls: Calls = [];
    const { observer, seen } = starts();
    const t = telemetry();
    const result = await alpha(store, { calls, observers: [observer, t.observer] }).recover();
    await t.provider.forceFlush();
    const [span] = t.segments(id);
    return { result, calls, cause: seen[0]?.resumed?.cause, span: span?.attributes };
  }

  /** A store of this kind (and its file, for SQLite) holding `id` as its dead holder left it. */
  async function crashed(label: string, id: string) {
    const path = join(dir, `${label}-${kind}.db`);
    const store = open(kind === 'sqlite' ? () => createSqliteStore({ path }) : make);
    await crashedHolder(kind, store, path, id);
    return store;
  }

  it('leaves the crash mark of the conversation it took by mistake: recover() says crash, re-runs the cut call with attempt 2, and counts lost what it counts without that resume()', async () => {
    const expected = await uninterrupted();
    // Without the racing resume(): what the recovery says.
    const alone = await recovered(await crashed('control', 'k'), 'k');
    expect(alone.cause).toBe('crash');
    expect(alone.calls[0]).toEqual(['k:3', 2]);
    expect(alone.span?.['conversation.resume.dispatches_lost']).toBe(2);

    const store = await crashed('raced', 'k');
    // `beta` read the id when it was still its own (its get() answers as it did then); by its
    // acquire the id is alpha's crashed conversation.
    const stale: ConversationStore = new Proxy(store, {
      get(target, key, receiver) {
        if (key === 'get')
          return async (id: string) => {
            const stored = await target.get(id);
            return stored && { ...stored, orchestrator: 'beta' };
          };
        const value = Reflect.get(target, key, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const error = await alpha(stale, { name: 'beta' })
      .resume('k')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConversationNotFoundError);
    expect((error as ConversationNotFoundError).orchestrator).toBe('alpha');
    const raced = await recovered(store, 'k');
    expect(raced.result).toMatchObject({ resumed: 1, ended: 1, failed: 0, skipped: 0 });
    expect(raced.cause).toBe('crash');
    expect(raced.calls[0]).toEqual(['k:3', 2]);
    expect(raced.span?.['conversation.resume.cause']).toBe('crash');
    expect(raced.span?.['conversation.resume.dispatches_lost']).toBe(
      alone.span?.['conversation.resume.dispatches_lost'],
    );
    const stored = await store.get('k');
    expect(stored?.status).toBe('ended');
    expect((stored?.result as { state?: { projection?: number } })?.state?.projection).toBe(
      expected.projection,
    );
  });
});

describe.each([...STORES, ...NETWORK_STORES])(
  '%s: a run aborted inside one of its steps',
  (kind, make) => {
    for (const durability of ['sync', 'async'] as Durability[]) {
      for (const where of ['responder', 'fold'] as const) {
        it(`${durability}, aborted from the ${where}: resumed as abort (not crash), no dispatch lost, the cut call re-run with attempt 2`, async () => {
          const expected = await uninterrupted();
          const store = open(make);
          const controller = new AbortController();
          const t = telemetry();
          const first: Calls = [];
          // Inside the third call's synchronous part, or inside the fold of its answer (4).
          const cut =
            where === 'responder'
              ? { onCall: (n: number) => n === 3 && controller.abort() }
              : { onFold: (content: number) => content === 4 && controller.abort() };
          const aborted = await alpha(store, {
            calls: first,
            durability,
            observers: [t.observer],
            ...cut,
          })
            .run(input, { conversationId: 'c', signal: controller.signal })
            .catch((e: unknown) => e);
          expect(aborted).toBeInstanceOf(ConversationAbortedError);
          expect(first.map(([key]) => key)).toEqual(['c:1', 'c:2', 'c:3']);
          // Another orchestrator (a new instance, as after a restart) resumes it.
          const calls: Calls = [];
          const { observer, seen } = starts();
          const result = await alpha(store, {
            calls,
            durability,
            observers: [observer, t.observer],
          }).resume('c');
          expect(result.state.projection).toBe(expected.projection);
          expect(result.dispatchCount).toBe(expected.dispatchCount);
          expect(seen.map((s) => s.resumed?.cause)).toEqual(['abort']);
          // The first call re-run is one the aborted segment ran: it says so.
          const [rerun] = calls;
          expect(rerun?.[1]).toBe(2);
          expect(first.map(([key]) => key)).toContain(rerun?.[0]);
          if (durability === 'sync') expect(rerun).toEqual(['c:3', 2]);
          expect(calls.slice(1).every(([, attempt]) => attempt === 1)).toBe(true);
          await t.provider.forceFlush();
          const [segment1, segment2] = t.segments('c');
          expect(segment1?.attributes['conversation.end.reason']).toBe('aborted');
          expect(segment2?.attributes['conversation.resume.cause']).toBe('abort');
          // The aborted segment ended its span: nothing it committed is lost.
          expect(segment2?.attributes['conversation.resume.dispatches_lost']).toBeUndefined();
          const told = new Set([...t.events(segment1), ...t.events(segment2)]);
          expect([...told].sort()).toEqual([1, 2, 3, 4, 5, 6]);
        });
      }
    }

    it('a long transcript (committed as entries): the mark is an entry that folds nothing, and the resumed transcript is the uninterrupted one', async () => {
      const transcript = (
        store: ConversationStore,
        onFold?: (n: number) => void,
        observers: ConversationObserver<string[], string>[] = [],
      ) =>
        new ConversationOrchestrator<string[], string>({
          name: 'transcript',
          store,
          observers,
          responders: [
            {
              name: 'r',
              respond: (_m, state) => ({
                sender: 'r',
                content: `${state.dispatchCount + 1}:${'x'.repeat(1_000)}`,
              }),
            },
          ],
          turnPolicy: roundRobin(),
          projection: {
            initial: (first) => [first.content],
            fold: (lines, m) => {
              if (m.sender === 'r') onFold?.(Number.parseInt(m.content, 10));
              return [...lines, m.content];
            },
          },
          termination: maxDispatches(40),
        });
      const expected = await transcript(createMemoryStore()).run(
        { sender: 'user', content: 'go' },
        { conversationId: 'u' },
      );
      const inner = open(make);
      const writes: string[] = [];
      const store: ConversationStore = new Proxy(inner, {
        get(target, key, receiver) {
          const value = Reflect.get(target, key, receiver);
          if (typeof value !== 'function') return value;
          return (...args: unknown[]) => {
            if (['acquire', 'commit', 'append', 'release'].includes(String(key)))
              writes.push(String(key));
            return value.apply(target, args);
          };
        },
      });
      const controller = new AbortController();
      await expect(
        transcript(store, (n) => n === 30 && controller.abort()).run(
          { sender: 'user', content: 'go' },
          { conversationId: 'long', signal: controller.signal },
        ),
      ).rejects.toBeInstanceOf(ConversationAbortedError);
      // Past 16 KiB the commits were entries; the mark is one more, then the lease is let go.
      expect(writes.slice(-4)).toEqual(['append', 'acquire', 'append', 'release']);
      const { observer, seen } = starts<string[], string>();
      const resumed = await transcript(store, undefined, [observer]).resume('long');
      expect(seen.map((s) => s.resumed?.cause)).toEqual(['abort']);
      expect(resumed.state.projection).toEqual(expected.state.projection);
      expect(resumed.dispatchCount).toBe(40);
    });

    it('when the mark cannot be written (the store fails then), the lease lapses: the next says crash and still re-runs the cut call with attempt 2', async () => {
      const inner = open(make);
      let failing = false;
      const store: ConversationStore = new Proxy(inner, {
        get(target, key, receiver) {
          if (key === 'acquire' && failing)
            return () => {
              failing = false;
              return Promise.reject(new Error('connection reset'));
            };
          const value = Reflect.get(target, key, receiver);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      const controller = new AbortController();
      const aborted = await alpha(store, {
        onCall: (n) => {
          if (n !== 3) return;
          failing = true;
          controller.abort();
        },
      })
        .run(input, { conversationId: 'f', signal: controller.signal })
        .catch((e: unknown) => e);
      expect(aborted).toBeInstanceOf(ConversationAbortedError);
      expect(failing).toBe(false);
      const calls: Calls = [];
      const { observer, seen } = starts();
      await alpha(store, { calls, observers: [observer] }).resume('f');
      expect(seen.map((s) => s.resumed?.cause)).toEqual(['crash']);
      expect(calls[0]).toEqual(['f:3', 2]);
    });

    it('recover() resumes it as abort, the cut call with attempt 2', async () => {
      const store = open(make);
      const controller = new AbortController();
      await alpha(store, { onCall: (n) => n === 3 && controller.abort() })
        .run(input, { conversationId: 'r', signal: controller.signal })
        .catch(() => undefined);
      const calls: Calls = [];
      const { observer, seen } = starts();
      expect(await alpha(store, { calls, observers: [observer] }).recover()).toMatchObject({
        resumed: 1,
        ended: 1,
      });
      expect(seen.map((s) => s.resumed?.cause)).toEqual(['abort']);
      expect(calls[0]).toEqual(['r:3', 2]);
    });

    it('a takeover aborted before its first commit: the next says abort, the crash’s lost dispatches told once (by the aborted one), the cut call re-run with attempt 2', async () => {
      const path = join(dir, `takeover-${kind}.db`);
      const store = open(kind === 'sqlite' ? () => createSqliteStore({ path }) : make);
      await crashedHolder(kind, store, path, 't');
      const t = telemetry();
      const { observer, seen } = starts();
      const stop = new AbortController();
      stop.abort();
      await expect(
        alpha(store, { observers: [observer, t.observer] }).resume('t', { signal: stop.signal }),
      ).rejects.toBeInstanceOf(ConversationAbortedError);
      const calls: Calls = [];
      await alpha(store, { calls, observers: [observer, t.observer] }).resume('t');
      expect(calls[0]).toEqual(['t:3', 2]);
      expect(seen.map((s) => s.resumed?.cause)).toEqual(['crash', 'abort']);
      await t.provider.forceFlush();
      // The dead holder's two dispatches were on no span that ended: lost, and said once.
      const lost = t
        .segments('t')
        .map((span) => span.attributes['conversation.resume.dispatches_lost'] ?? 0);
      expect(lost).toEqual([2, 0]);
    });
  },
);
