/**
 * Two processes cancel one suspended conversation at the same moment, on one SQLite file: one
 * ends it (`true`), the other is told it had already ended (`false`), as two cancel() calls in one
 * process are. Neither rejects with ConversationLeaseError: a cancel's brief hold is not a live run.
 */
import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import {
  ConversationAbortedError,
  ConversationOrchestrator,
  maxDispatches,
  roundRobin,
  suspend,
} from '../../src/index.ts';
import { createSqliteStore } from '../../src/stores/sqlite/index.ts';
import { tempDirForFile } from '../helpers/temp-dir.ts';

const exec = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../..');
const dir = tempDirForFile('cancel-race-');

/** A conversation of `cancel_race` waiting in the store (its responder suspended it). */
async function suspended(path: string, id: string): Promise<void> {
  const store = createSqliteStore({ path });
  const orchestrator = new ConversationOrchestrator<number, number>({
    name: 'cancel_race',
    store,
    responders: [{ name: 'r', respond: () => suspend({ ask: 'approve?' }) }],
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (sum, m) => sum + m.content },
    termination: maxDispatches(10),
  });
  const result = await orchestrator.run({ sender: 'u', content: 1 }, { conversationId: id });
  expect(result.suspended).toBeDefined();
  await store.close();
}

describe('two processes cancelling one conversation at once', () => {
  it('one ends it (true), the other is told it had already ended (false), in every round', async () => {
    const path = join(dir, 'race.db');
    const answers: string[][] = [];
    for (let round = 0; round < 6; round++) {
      const id = `race-${round}`;
      await suspended(path, id);
      const at = String(Date.now() + 1_500);
      const both = await Promise.all(
        [0, 1].map(() =>
          exec(
            process.execPath,
            ['--import', 'tsx', 'test/fixtures/cancel-race.ts', path, id, at],
            {
              cwd: ROOT,
            },
          ).then(({ stdout }) => stdout.trim()),
        ),
      );
      answers.push(both.sort());
    }
    expect(answers).toEqual(Array.from({ length: 6 }, () => ['false', 'true']));
    // And the conversation ended as cancelled: a resume hands back the abort.
    const store = createSqliteStore({ path });
    const orchestrator = new ConversationOrchestrator<number, number>({
      name: 'cancel_race',
      store,
      responders: [{ name: 'r', respond: (m) => m }],
      turnPolicy: roundRobin(),
      projection: { initial: () => 0, fold: (sum, m) => sum + m.content },
      termination: maxDispatches(10),
    });
    await expect(orchestrator.resume('race-0')).rejects.toBeInstanceOf(ConversationAbortedError);
    await store.close();
  }, 120_000);
});
