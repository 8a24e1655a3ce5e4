/**
 * The transcript conversation of the incremental-checkpoint tests (durable/incremental and
 * observability/checkpoint-writes) as one orchestrator: test/helpers/transcript.ts's projection
 * and responders, each answer a line of about 1 KB naming its dispatch, on the stores both run on.
 */
import {
  ConversationOrchestrator,
  type ConversationStore,
  createMemoryStore,
  maxDispatches,
  type OrchestratorOptions,
  roundRobin,
} from '../../src/index.ts';
import { createSqliteStore } from '../../src/stores/sqlite/index.ts';
import { type Transcript, transcriptProjection, transcriptResponders } from './transcript.ts';

/** A line of about 1 KB: the `n`th of the transcript, said by `who`. */
export const transcriptLine = (n: number, who: string) => `${who}:${n}:${'x'.repeat(1000)}`;

/** The stores the transcript tests run on, each fresh: the memory store and SQLite in memory. */
export const TRANSCRIPT_STORES: [string, () => ConversationStore][] = [
  ['memory', () => createMemoryStore()],
  ['sqlite', () => createSqliteStore({ path: ':memory:', synchronous: 'NORMAL' })],
];

type Options = OrchestratorOptions<Transcript, string>;

/**
 * The orchestrator's options it passes on (name, store and checkpoints; observers, by default
 * none, and historySize, by default 0), and the transcript's own.
 */
export interface TranscriptOrchestratorOptions
  extends Required<Pick<Options, 'name' | 'store' | 'checkpoints'>>,
    Pick<Options, 'observers' | 'historySize'> {
  /** Dispatches in all. */
  readonly dispatches: number;
  /** Whether each answer is a promise, so that an abort lands while a call is open. @default false */
  readonly answersLater?: boolean;
  /** Aborts `controller` with `'drain'` once dispatch `at` is heard. */
  readonly drainAt?: { at: number; controller: AbortController } | undefined;
}

/** Responders `a` and `b` in turn, each answering the next line (`<name><<sender>`), `dispatches` of them. */
export function transcriptOrchestrator({
  name,
  store,
  dispatches,
  checkpoints,
  observers = [],
  historySize = 0,
  answersLater = false,
  drainAt,
}: TranscriptOrchestratorOptions): ConversationOrchestrator<Transcript, string> {
  return new ConversationOrchestrator<Transcript, string>({
    name,
    store,
    checkpoints,
    observers,
    historySize,
    responders: transcriptResponders((who, m, state) => {
      const line = transcriptLine(state.projection.lines.length, `${who}<${m.sender}`);
      return answersLater ? Promise.resolve(line) : line;
    }),
    turnPolicy: roundRobin(),
    projection: transcriptProjection(),
    termination: maxDispatches(dispatches),
    listener: (_state, _decision, dispatchCount) => {
      if (drainAt !== undefined && dispatchCount === drainAt.at) drainAt.controller.abort('drain');
    },
  });
}
