/**
 * Incremental checkpoints on the memory store: a transcript conversation (a message of 1 KB per
 * dispatch, folded into a growing list) commits entries and now and then a snapshot; handed back
 * at any dispatch and resumed by another orchestrator, it ends exactly as an uninterrupted run.
 */
import { describe, expect, it } from 'vitest';
import {
  CheckpointError,
  type CheckpointOptions,
  ConversationAbortedError,
  ConversationOrchestrator,
  type ConversationStore,
  createMemoryStore,
  type MemoryStore,
  maxDispatches,
  roundRobin,
} from '../../src/index.ts';
import { createSqliteStore } from '../../src/stores/sqlite/index.ts';
import {
  type Transcript,
  transcriptProjection,
  transcriptResponders,
} from '../helpers/transcript.ts';
import { counting, wrap } from '../helpers/wrapped-store.ts';

const line = (n: number, who: string) => `${who}:${n}:${'x'.repeat(1000)}`;

function transcript(
  store: ConversationStore,
  dispatches: number,
  checkpoints: CheckpointOptions = {},
  historySize = 0,
  drainAt?: { at: number; controller: AbortController },
) {
  return new ConversationOrchestrator<Transcript, string>({
    name: 'transcript',
    store,
    checkpoints,
    historySize,
    responders: transcriptResponders((name, m, state) =>
      line(state.projection.lines.length, `${name}<${m.sender}`),
    ),
    turnPolicy: roundRobin(),
    projection: transcriptProjection(),
    termination: maxDispatches(dispatches),
    listener: (_state, _decision, dispatchCount) => {
      if (drainAt !== undefined && dispatchCount === drainAt.at) drainAt.controller.abort('drain');
    },
  });
}

const input = { sender: 'user', content: 'begin' };

const stores: [string, () => ConversationStore][] = [
  ['memory', () => createMemoryStore()],
  ['sqlite', () => createSqliteStore({ path: ':memory:', synchronous: 'NORMAL' })],
];

describe.each(stores)('a transcript conversation on the %s store', (_name, newStore) => {
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

  it('commits whole states with checkpoints.incremental false', async () => {
    const { store, calls } = counting(newStore());
    await transcript(store, 50, { incremental: false }).run(input, { conversationId: 't2' });
    expect(calls.append).toBe(0);
    expect(calls.commit).toBe(50);
  });
});
