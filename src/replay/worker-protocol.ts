/** What the CLI's main thread and its replay worker (worker.ts) say to each other. */

/** Marks the worker's input, so that worker.ts runs only where the command started it. */
export const WORKER_MARK = 'conversation-orchestrator replay worker';

/** What the main thread hands the worker. */
export interface WorkerInput {
  readonly mark: typeof WORKER_MARK;
  readonly files: readonly string[];
  readonly policy: string;
  readonly cwd: string;
  readonly skipBad: boolean;
  readonly maxLineBytes: number | undefined;
  readonly maxSkippedShown: number;
  /** Int32 slots: see the SLOT_* constants. */
  readonly progress: SharedArrayBuffer;
  /** The conversation being decided: its id as UTF-8, `ID_BYTES` at most. */
  readonly conversation: SharedArrayBuffer;
}

/** What the worker tells the main thread. */
export type WorkerMessage =
  | { readonly kind: 'loaded'; readonly exportName: string }
  | { readonly kind: 'skipped'; readonly message: string }
  | { readonly kind: 'report'; readonly report: unknown }
  | { readonly kind: 'usage'; readonly message: string }
  | { readonly kind: 'unexpected'; readonly message: string };

/** Increments when a decision (or a `start()`) begins. */
export const SLOT_GENERATION = 0;
/** 1 while the candidate runs, else 0. */
export const SLOT_DECIDING = 1;
/** The dispatch being decided (0 for `start()`). */
export const SLOT_DISPATCH = 2;
/** The ordinal of the conversation being replayed (1, 2, …). */
export const SLOT_ORDINAL = 3;
/** Bytes of the conversation's id in `conversation`. */
export const SLOT_ID_LENGTH = 4;
export const SLOTS = 5;
export const ID_BYTES = 256;
