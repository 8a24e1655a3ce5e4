/**
 * Incremental checkpoints on the memory store: a transcript conversation (a message of 1 KB per
 * dispatch, folded into a growing list) commits entries and now and then a snapshot; handed back
 * at any dispatch and resumed by another orchestrator, it ends exactly as an uninterrupted run.
 */
import { describe, expect, it } from 'vitest';
import {
  type CheckpointEntry,
  CheckpointError,
  type CheckpointOptions,
  ConversationAbortedError,
  ConversationOrchestrator,
  type ConversationStore,
  createMemoryStore,
  type IncrementalStore,
  type MemoryStore,
  type Message,
  maxDispatches,
  roundRobin,
} from '../../src/index.ts';
import type { Transcript } from '../helpers/transcript.ts';
import {
  TRANSCRIPT_STORES,
  transcriptLine,
  transcriptOrchestrator,
} from '../helpers/transcript-conversation.ts';
import { counting, wrap } from '../helpers/wrapped-store.ts';

const transcript = (
  store: ConversationStore,
  dispatches: number,
  checkpoints: CheckpointOptions = {},
  historySize = 0,
  drainAt?: { at: number; controller: AbortController },
) =>
  transcriptOrchestrator({
    name: 'transcript',
    store,
    dispatches,
    checkpoints,
    historySize,
    drainAt,
  });

const input = { sender: 'user', content: 'begin' };

describe.each(TRANSCRIPT_STORES)('a transcript conversation on the %s store', (_name, newStore) => {
  it('commits entries past the first few dispatches, and snapshots now and then', async () => {
    const { store, calls } = counting(newStore());
    const result = await transcript(store, 400, { snapshotEveryDispatches: 100 }).run(input, {
      conversationId: 't1',
    });
    expect(result.dispatchCount).toBe(400);
    // Whole commits while the state is small (under 16 KiB), then entries; the ending is whole.
    expect(calls.append).toBeGreaterThan(380);
    expect(calls.commit).toBeLessThan(20);
    expect(calls.snapshot).toBeGreaterThanOrEqual(3);
    // An entry holds the dispatch's message, not the transcript.
    expect(calls.appendBytes / calls.append).toBeLessThan(1600);
  });

  it.each([
    { at: 3, checkpoints: {} },
    { at: 57, checkpoints: {} },
    { at: 233, checkpoints: { snapshotEveryDispatches: 50 } },
    { at: 250, checkpoints: { snapshotEveryDispatches: 50 } },
    { at: 301, checkpoints: { snapshotEveryBytes: 20_000 } },
  ])(
    'handed back at dispatch $at and resumed elsewhere, ends as an uninterrupted run ($checkpoints)',
    async ({ at, checkpoints }) => {
      const baseline = await transcript(createMemoryStore(), 320, checkpoints, 7).run(input, {
        conversationId: 'b',
      });
      const store = newStore();
      const controller = new AbortController();
      const first = transcript(store, 320, checkpoints, 7, { at, controller });
      const drained = await first
        .run(input, { conversationId: 'd', drain: controller.signal })
        .catch((e: unknown) => e);
      expect(drained).toBeInstanceOf(ConversationAbortedError);
      const handedBack = (drained as ConversationAbortedError<Transcript, string>).state;
      expect(handedBack.dispatchCount).toBe(at);
      // A snapshot written behind the loop lands before the next orchestrator reads.
      await new Promise((resolve) => setTimeout(resolve, 10));
      let folded = -1;
      const reading = wrap(store, {
        acquire: async (...args: Parameters<MemoryStore['acquire']>) => {
          const outcome = await store.acquire(...args);
          if (outcome.status === 'acquired') folded = outcome.entries?.length ?? 0;
          return outcome;
        },
      });
      const resumed = await transcript(reading, 320, checkpoints, 7).resume('d');
      // Past the first whole commits, the resume folded entries after a base.
      if (at > 20) expect(folded).toBeGreaterThan(0);
      else expect(folded).toBe(0);
      expect(resumed.dispatchCount).toBe(320);
      expect(resumed.state.projection).toEqual(baseline.state.projection);
      expect(resumed.state.history).toEqual(baseline.state.history);
      expect(resumed.state.lastMessage).toEqual(baseline.state.lastMessage);
    },
  );

  it.each([
    ['text the codec cannot decode', '{"v":1,', /checkpoint could not be decoded/],
    [
      'an entry of another shape',
      JSON.stringify({ v: 1, entry: true, folded: 'no', queue: [], queueTail: 0 }),
      /not one this version can resume: expected entry \d+'s `folded` to be an array of messages/,
    ],
    [
      'an entry of another version',
      JSON.stringify({ v: 2, entry: true, folded: [], queue: [], queueTail: 0 }),
      /expected entry \d+'s `v` to be 1/,
    ],
    [
      'an entry taking more off the queue than it holds',
      JSON.stringify({
        v: 1,
        entry: true,
        folded: [],
        lastMessage: { sender: 'a', content: 'x' },
        queue: [],
        queueTail: 0,
        queueDrop: 99,
      }),
      /expected entry \d+'s `queueDrop` to be at most the queue it follows \(\d+ messages\), got 99/,
    ],
  ])(
    'refuses to resume from %s, with a CheckpointError, and leaves it for a version that can',
    async (_what, bad, message) => {
      const store = newStore();
      const controller = new AbortController();
      await transcript(store, 320, {}, 0, { at: 60, controller })
        .run(input, { conversationId: 'bad', drain: controller.signal })
        .catch(() => {});
      const corrupt = wrap(store, {
        acquire: async (...args: Parameters<MemoryStore['acquire']>) => {
          const outcome = await store.acquire(...args);
          return outcome.status === 'acquired'
            ? { ...outcome, entries: [...(outcome.entries ?? []), bad] }
            : outcome;
        },
      });
      const error = await transcript(corrupt, 320)
        .resume('bad')
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CheckpointError);
      expect((error as CheckpointError).message).toMatch(message);
      // Released as it was: the store's own entries still resume it.
      const resumed = await transcript(store, 320).resume('bad');
      expect(resumed.dispatchCount).toBe(320);
    },
  );

  // A responder answering with two messages: the queue's backlog grows by one a round, and an
  // entry is what the dispatch added to it (it held the whole queue: 33 KB at dispatch 149).
  const backlog = (store: ConversationStore, at?: { at: number; controller: AbortController }) =>
    new ConversationOrchestrator<Transcript, string>({
      name: 'backlog',
      store,
      historySize: 4,
      checkpoints: { snapshotEveryDispatches: 40 },
      responders: ['a', 'b', 'c'].map((name) => ({
        name,
        respond: async (m: Message<string>, state) => {
          const n = state.projection.lines.length;
          return name === 'c'
            ? [
                { sender: 'c', content: transcriptLine(n, `c1<${m.sender}`) },
                { sender: 'c', content: `c2:${n}` },
              ]
            : { sender: name, content: transcriptLine(n, `${name}<${m.sender}`) };
        },
      })),
      turnPolicy: roundRobin(),
      projection: {
        initial: (i) => ({ lines: [i.content] }),
        fold: (s, m) => {
          s.lines.push(m.content);
          return s;
        },
      },
      termination: maxDispatches(150),
      listener: (_state, _decision, dispatchCount) => {
        if (at !== undefined && dispatchCount === at.at) at.controller.abort('drain');
      },
    });

  it('writes an entry the size of what the dispatch added, however long the queue', async () => {
    const { store, calls } = counting(newStore());
    const sizes: number[] = [];
    const sizing = wrap(store, {
      append: (entry: CheckpointEntry, ...rest: [never, number]) => {
        sizes.push(entry.entry.length);
        return (store as IncrementalStore).append(entry, ...rest);
      },
    });
    const result = await backlog(sizing).run(input, { conversationId: 'q' });
    expect(result.dispatchCount).toBe(150);
    expect(calls.append).toBe(sizes.length);
    expect(sizes.length).toBeGreaterThan(100);
    expect(Math.max(...sizes.slice(-20))).toBeLessThan(2 * Math.max(...sizes.slice(0, 20)));
    expect(Math.max(...sizes)).toBeLessThan(2_500);
  });

  it.each([7, 41, 99, 143])(
    'with a backlog, handed back at dispatch %i and resumed elsewhere, ends as an uninterrupted run',
    async (at) => {
      const baseline = await backlog(createMemoryStore()).run(input, { conversationId: 'b' });
      const store = newStore();
      const controller = new AbortController();
      const drained = await backlog(store, { at, controller })
        .run(input, { conversationId: 'd', drain: controller.signal })
        .catch((e: unknown) => e);
      expect(drained).toBeInstanceOf(ConversationAbortedError);
      await new Promise((resolve) => setTimeout(resolve, 10));
      const resumed = await backlog(store).resume('d');
      expect(resumed.dispatchCount).toBe(150);
      expect(resumed.state.projection).toEqual(baseline.state.projection);
      expect(resumed.state.history).toEqual(baseline.state.history);
      expect(resumed.state.lastMessage).toEqual(baseline.state.lastMessage);
    },
  );

  it('commits whole states with checkpoints.incremental false', async () => {
    const { store, calls } = counting(newStore());
    await transcript(store, 50, { incremental: false }).run(input, { conversationId: 't2' });
    expect(calls.append).toBe(0);
    expect(calls.commit).toBe(50);
  });
});
