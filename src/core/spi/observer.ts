/**
 * The second, optional lifecycle SPI: for plugins (telemetry) that need more than `onDispatch`.
 * The orchestrator calls `startConversation` once per run; the returned observation receives
 * that conversation's events, so a plugin keeps per-conversation state without any lookup.
 * The single-function `ConversationListener` is independent of it and unchanged by it.
 */
import type { ConversationError } from './errors.ts';
import type {
  ConversationResult,
  ConversationState,
  Message,
  TerminationDecision,
  Usage,
  UsageTotals,
} from './types.ts';

/** What an observer learns when a conversation starts. */
export interface ConversationStart<C = unknown> {
  /** The orchestrator's `name`. */
  readonly orchestrator: string;
  /** The conversation's id: the one `run()` was given, or the generated one. */
  readonly conversationId: string;
  /** The message the conversation started with. */
  readonly input: Message<C>;
  /** Responder names in construction order; `DispatchInfo.responderIndex` indexes into it. */
  readonly responders: readonly string[];
  /** Each responder's `provider` (undefined where it declares none), in the same order. */
  readonly providers?: readonly (string | undefined)[];
  /** `performance.timeOrigin + performance.now()` at the start, in milliseconds. */
  readonly startTimeMs: number;
  /**
   * The orchestrator's store's `name` (`memory`, `sqlite` …) when it has one: the conversation is
   * durable, and may go on in later segments (`resumed`). Undefined without a store.
   */
  readonly store?: string | undefined;
  /**
   * Set when this start continues a stored conversation (`resume()`, `recover()`): a later
   * segment of the same conversation. `input` is then the conversation's original input.
   */
  readonly resumed?: ConversationResume | undefined;
}

/** What a resumed conversation's observers learn of what was committed before. */
export interface ConversationResume {
  /**
   * `crash`: the previous holder's lease was still recorded (it died or stalled; the dispatch in
   * flight runs again); `abort`: the previous segment was aborted inside one of its steps (a
   * responder aborting its own run synchronously, an abort from a fold or a policy) and ended,
   * leaving its last commit marked (the call it cut runs again, its attempt raised, as after a
   * crash); `suspend`: it was suspended; `handoff`: a holder released it while running (an abort
   * at a point the store could hold, a drain); `cancel`: `cancel()` ends it as aborted, running
   * nothing.
   */
  readonly cause: 'crash' | 'abort' | 'suspend' | 'handoff' | 'cancel';
  /** Which segment this is: 2 for the first resume, 3 … (counted in the checkpoint). */
  readonly segment: number;
  /** Dispatches committed before this segment. */
  readonly dispatchCount: number;
  /** Active milliseconds committed before this segment (time suspended or waiting not counted). */
  readonly elapsedMs: number;
  /** What this observer's `save()` returned at the last commit (under its `key`), or `undefined`. */
  readonly saved: unknown;
  /**
   * Checkpoint entries folded onto the stored base (a snapshot or a whole checkpoint) to rebuild
   * the state: 0 when the state was stored whole.
   */
  readonly entries: number;
}

/**
 * One checkpoint write of a durable conversation, as an observer hears of it: a commit that
 * landed (`whole`: the whole state; `entry`: what the dispatches added since the last commit),
 * or a snapshot of the whole state written off the per-dispatch path (landed or failed).
 */
export interface CheckpointWrite {
  /** What was written: the whole state, an entry, or a snapshot. */
  readonly kind: 'whole' | 'entry' | 'snapshot';
  /** UTF-8 bytes of what was written (the encoded state or entry). */
  readonly bytes: number;
  /** Milliseconds of the store call. */
  readonly durationMs: number;
  /** Set when a snapshot failed (the store threw, refused it or did not answer in time). */
  readonly error?: unknown;
}

/** One successful dispatch, as an observer sees it. */
export interface DispatchInfo<S, C = unknown> {
  /** The state after this dispatch's answer was folded in. */
  readonly state: ConversationState<S, C>;
  /** The termination policy's decision after this dispatch. */
  readonly decision: TerminationDecision;
  /** This dispatch's number: 1, 2, 3 … */
  readonly dispatchCount: number;
  /** Milliseconds since the conversation started (active time: see `ConversationResume`). */
  readonly elapsedMs: number;
  /**
   * The invocation's attempt: 1, or more when it ran again after a crash. The loop always sets
   * it; optional only so that infos built by hand (tests, replays) need not.
   */
  readonly attempt?: number;
  /** Which responder answered: an index into `ConversationStart.responders`. */
  readonly responderIndex: number;
  /**
   * Milliseconds of this dispatch: from the end of the previous dispatch (or the conversation's
   * start, or an async turn policy's answer) to the end of this responder's answer. That is the
   * responder's time plus the orchestrator's own sub-microsecond work; one clock read per dispatch.
   */
  readonly durationMs: number;
  /**
   * The tokens this dispatch's invocation reported; undefined when it reported none. Tokens of
   * invocations that failed or were skipped are not in a later dispatch's `usage`: `onUsage`
   * told of them as they were reported.
   */
  readonly usage?: UsageTotals | undefined;
}

/** How a conversation ended: `result` on success, `error` on failure or abort. */
export type ConversationEnd<S, C = unknown> =
  | {
      /** The run resolved. */
      readonly ok: true;
      /** What `run()` resolved with. */
      readonly result: ConversationResult<S, C>;
      /** With a store: see the failure's `ended`. Undefined without a store. */
      readonly ended?: boolean | undefined;
    }
  | {
      /** The run rejected. */
      readonly ok: false;
      /** What `run()` rejected with. */
      readonly error: ConversationError<S, C>;
      /**
       * With a store: true when this segment's ending was committed (the conversation is over and
       * its ending is counted here); false when the store still holds it as resumable (suspended,
       * or running after an abort, a store failure or a lost lease: it ends in a later segment,
       * maybe in another process). Undefined without a store: every end is the conversation's.
       */
      readonly ended?: boolean | undefined;
    };

/** Why a responder invocation failed (a wrapper, so that even `throw undefined` is a failure). */
export interface ResponderFailure {
  /** What the responder threw or rejected with, whatever it is. */
  readonly error: unknown;
}

/**
 * Per-conversation hooks. Every member is optional; a throwing hook never breaks the run. The
 * orchestrator reads which hooks exist once, when the conversation starts: leave out the ones you
 * do not need and that part of the hot path is skipped. Hooks are called as methods of this
 * object (`this` is it).
 */
export interface ConversationObservation<S, C = unknown> {
  /**
   * Runs the whole conversation: wrap `run` to enter a context (the conversation span's) once.
   * With an AsyncLocalStorage context manager that context follows every promise continuation
   * and timer of the loop, so the turn policy, the responders and the listener all run inside it
   * at no per-dispatch cost. Must call `run` exactly once, synchronously, and return what it
   * returns.
   */
  runConversation?: (<T>(run: () => T) => T) | undefined;
  /**
   * Called after every successful dispatch, before the listener. The `info` object is reused
   * between calls for speed: read it, do not keep it.
   */
  onDispatch?: ((info: DispatchInfo<S, C>) => void) | undefined;
  /** A responder is about to be invoked; `attempt` is 1, or more when it runs again after a crash. */
  onResponderStart?(responderIndex: number, message: Message<C>, attempt: number): void;
  /**
   * Runs the responder invocation; wrap `invoke` to run it in a context (a span's).
   * Must call `invoke` exactly once and return what it returns.
   */
  runResponder?: (<T>(responderIndex: number, invoke: () => T) => T) | undefined;
  /** A responder invocation ended; `failure` is given when it threw or rejected. */
  onResponderEnd?(responderIndex: number, durationMs: number, failure?: ResponderFailure): void;
  /**
   * A responder invocation threw or rejected (after `onResponderEnd`). For plugins that only
   * count failures: defining this instead of `onResponderEnd` keeps the success path free.
   */
  onResponderError?(responderIndex: number, durationMs: number, error: unknown): void;
  /**
   * A report of `context.reportUsage` was accepted (checked, a copy holding the fields that came),
   * as it is made: also for invocations that later fail or are skipped. `responderIndex` is -1
   * for the turn policy; `dispatchNumber` is the dispatch the invocation would be. Never called
   * after the run settled.
   */
  onUsage?(responderIndex: number, usage: Usage, dispatchNumber: number): void;
  /** The listener (or one of the composed listeners) threw or rejected. */
  onListenerError?(error: unknown): void;
  /**
   * Called exactly once, on every exit path of this segment. A suspension is `{ ok: true }` with
   * `result.suspended` set.
   */
  onConversationEnd?(end: ConversationEnd<S, C>): void;
  /**
   * Called at each commit of a durable conversation, before the checkpoint is encoded: JSON-safe
   * data (a trace context, a count) stored under the observer's `key` and handed back as
   * `ConversationStart.resumed.saved` when the conversation resumes. Ignored without a `key`.
   */
  save?(): unknown;
  /** A commit attempt finished: its duration, and the error when it failed (not a refusal). */
  onCheckpoint?(durationMs: number, error?: unknown): void;
  /**
   * A commit landed (after `onCheckpoint`), or a snapshot landed or failed: what was written and
   * its size. Never called for a commit that failed or was refused (`onCheckpoint` says those).
   */
  onCheckpointWrite?(write: CheckpointWrite): void;
  /** The store refused a commit or a lease renewal: another process holds the conversation now. */
  onLeaseConflict?(): void;
}

/** A plugin of the lifecycle SPI. */
export interface ConversationObserver<S = unknown, C = unknown> {
  /**
   * A stable name under which the observations' `save()` data is kept in checkpoints (1-64
   * characters of the name rule). Two observers with one key share one slot: give each its own.
   */
  readonly key?: string;
  /**
   * Called once per run, before anything else of it: returns the hooks for that conversation,
   * or `undefined` to sit this one out. A throw or anything else is reported and set aside.
   */
  startConversation(start: ConversationStart<C>): ConversationObservation<S, C> | undefined;
  /**
   * A listener failed after its run settled (a promise it returned rejected late, or it called
   * `reportError` late): that conversation's observation has ended and hears nothing more, so
   * the observer is told here, with the orchestrator's name and the conversation's id. Called
   * whether or not this observer observed that conversation. A throw is reported and ignored.
   */
  onLateListenerError?(error: unknown, orchestrator: string, conversationId: string): void;
}
