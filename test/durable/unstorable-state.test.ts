/**
 * A state that can never be checkpointed (a BigInt the JSON codec refuses, or one larger than the
 * store's maxCheckpointBytes) ends its conversation as failed in the store, with the error: it
 * must not stay `running` for every recover() to resume and fail again, forever. A store that
 * fails (an outage) is another matter: that conversation stays resumable (tested elsewhere).
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  CheckpointError,
  ConversationOrchestrator,
  maxDispatches,
  roundRobin,
} from '../../src/index.ts';
import { createSqliteStore } from '../../src/stores/sqlite/index.ts';
import { tempDirForFile } from '../helpers/temp-dir.ts';

const dir = tempDirForFile('unstorable-');

type State = { total: number; blob?: unknown };

function orchestrator(path: string, initial: () => State) {
  // Whole states (and snapshots) bounded at 4 MiB, as maxCheckpointBytes bounded them before entries.
  const store = createSqliteStore({ path, maxSnapshotBytes: 4 * 1024 * 1024 });
  const o = new ConversationOrchestrator<State, number>({
    name: 'unstorable',
    store,
    responders: [{ name: 'r', respond: (m) => ({ sender: 'r', content: m.content + 1 }) }],
    turnPolicy: roundRobin(),
    projection: { initial, fold: (s, m) => ({ ...s, total: s.total + m.content }) },
    termination: maxDispatches(5),
  });
  return { o, store };
}

describe.each([
  ['a BigInt in the initial projection', () => ({ total: 0, blob: 10n }), /BigInt/],
  [
    'an initial projection past the store (5 MiB on a store of 4 MiB snapshots)',
    () => ({ total: 0, blob: 'x'.repeat(5 * 1024 * 1024) }),
    /expected at most 4194304 bytes in the store, got \d+/,
  ],
])('a conversation with %s', (_, initial, message) => {
  it('fails run() with CheckpointError and the state reached, and ends as failed in the store', async () => {
    const path = join(dir, `${Math.random().toString(36).slice(2)}.db`);
    const first = orchestrator(path, initial);
    const failed = await first.o
      .run({ sender: 'u', content: 0 }, { conversationId: 'c-1' })
      .catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(CheckpointError);
    expect((failed as CheckpointError).message).toMatch(message);
    expect((failed as CheckpointError).state.conversationId).toBe('c-1');
    const stored = await first.store.get('c-1');
    expect(stored?.status).toBe('ended');
    await first.store.close();

    // A restart: recover() resumes nothing, three times over, and resume() tells the failure.
    for (let i = 0; i < 3; i++) {
      const next = orchestrator(path, initial);
      expect(await next.o.recover()).toEqual({
        resumed: 0,
        ended: 0,
        suspended: 0,
        failed: 0,
        skipped: 0,
      });
      const told = await next.o.resume('c-1').catch((error: unknown) => error);
      expect(told).toBeInstanceOf(CheckpointError);
      expect((told as Error).message).toMatch(message);
      await next.store.close();
    }
  });
});
