/**
 * The CLI's replay, in a worker thread: it loads the candidate and replays the recordings while
 * the command's main thread keeps time. A candidate that never returns (`for (;;) {}`) cannot be
 * interrupted from inside its own thread; from the main thread it can (`worker.terminate()`).
 * Each decision marks itself in shared memory (a generation counter, an in-decision flag, the
 * conversation and dispatch), so the main thread sees one that takes too long at a cost of a few
 * atomic stores per decision.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { TerminationPolicy } from '../core/spi/policy.ts';
import { isTerminationPolicy } from './candidate.ts';
import { loadPolicy, UsageError } from './load-policy.ts';
import { RecordingFormatError, readRecordingFiles } from './read.ts';
import { replay } from './replay.ts';
import { describeThrown } from './serialize.ts';
import {
  SLOT_DECIDING,
  SLOT_DISPATCH,
  SLOT_GENERATION,
  SLOT_ID_LENGTH,
  SLOT_ORDINAL,
  WORKER_MARK,
  type WorkerInput,
  type WorkerMessage,
} from './worker-protocol.ts';

/** The candidate with every `start()` and check marked in `progress`. */
function timed(
  policy: TerminationPolicy<unknown, undefined>,
  progress: Int32Array,
  id: Uint8Array,
): TerminationPolicy<unknown, undefined> {
  const encoder = new TextEncoder();
  const enter = (dispatch: number): void => {
    Atomics.store(progress, SLOT_DISPATCH, dispatch);
    Atomics.add(progress, SLOT_GENERATION, 1);
    Atomics.store(progress, SLOT_DECIDING, 1);
  };
  const leave = (): void => {
    Atomics.store(progress, SLOT_DECIDING, 0);
  };
  return {
    name: policy.name,
    start() {
      Atomics.add(progress, SLOT_ORDINAL, 1);
      enter(0);
      let check: ReturnType<typeof policy.start>;
      try {
        check = policy.start();
      } finally {
        leave();
      }
      if (typeof check !== 'function') return check;
      return (state, elapsedMs) => {
        if (state.dispatchCount === 1) {
          const written = encoder.encodeInto(String(state.conversationId), id).written;
          Atomics.store(progress, SLOT_ID_LENGTH, written);
        }
        enter(state.dispatchCount);
        try {
          return check(state, elapsedMs);
        } finally {
          leave();
        }
      };
    },
  };
}

async function main(input: WorkerInput, port: NonNullable<typeof parentPort>): Promise<void> {
  const post = (message: WorkerMessage): void => port.postMessage(message);
  try {
    const { policy, exportName } = await loadPolicy(input.policy, input.cwd);
    post({ kind: 'loaded', exportName });
    let shown = 0;
    const recordings = readRecordingFiles(input.files, {
      ...(input.maxLineBytes === undefined ? {} : { maxLineBytes: input.maxLineBytes }),
      skipBad: input.skipBad,
      onBadLine: (error) => {
        if (shown++ < input.maxSkippedShown) post({ kind: 'skipped', message: error.message });
      },
    });
    const progress = new Int32Array(input.progress);
    const id = new Uint8Array(input.conversation);
    const candidate = isTerminationPolicy(policy)
      ? timed(policy, progress, id)
      : Object.fromEntries(
          Object.entries(policy).map(([orchestrator, p]) => [
            orchestrator,
            timed(p as TerminationPolicy<unknown, undefined>, progress, id),
          ]),
        );
    const report = await replay(recordings, candidate);
    post({ kind: 'report', report });
  } catch (error) {
    if (error instanceof UsageError || error instanceof RecordingFormatError)
      post({ kind: 'usage', message: error.message });
    else post({ kind: 'unexpected', message: describeThrown(error) });
  }
}

if (parentPort !== null && (workerData as Partial<WorkerInput> | null)?.mark === WORKER_MARK) {
  // Not a top-level await: a worker terminated while its candidate's module never finishes
  // loading would make Node 24 warn of an unsettled top-level await. A module that never settles
  // holds nothing that keeps the worker alive, so a timer does, until main() has reported (it
  // reports every failure) or the parent ends the worker at --load-timeout-ms.
  const alive = setInterval(() => {}, 2 ** 30);
  void main(workerData as WorkerInput, parentPort).finally(() => clearInterval(alive));
}
