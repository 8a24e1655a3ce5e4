/**
 * What the store session (session.ts) commits, decided from the numbers alone: whether a commit
 * is an entry or the whole state, whether a snapshot goes with it, which size limit a whole
 * commit meets, and the texts and checkpoints it writes. Nothing here calls the store.
 */
import type { LoopPosition } from '../loop/durability.ts';
import { type ConversationError, storedFailure } from '../spi/errors.ts';
import type { Checkpoint, CheckpointEntry, ConversationStatus } from '../spi/store.ts';
import type { Message } from '../spi/types.ts';
import type { CheckpointCodec, CheckpointState, EndedState, FreshState } from './checkpoint.ts';
import { type CheckpointPlan, snapshotDue } from './incremental.ts';

/** One commit, built: a whole checkpoint or an entry (with the snapshot to send once it lands). */
export interface Built {
  readonly seq: number;
  readonly dispatchCount: number;
  readonly checkpoint?: Checkpoint | undefined;
  readonly entry?: CheckpointEntry | undefined;
  /** UTF-8 bytes of the state or entry text. */
  readonly bytes: number;
  /** How many of the folded messages it holds (trimmed once it lands). */
  readonly foldedUpTo: number;
  readonly snapshot?: Checkpoint | undefined;
  readonly snapshotBytes: number;
  /** The queue a running commit stores (the next entry is written against it once it lands). */
  readonly queue?: readonly unknown[] | undefined;
}

/**
 * Whether a commit may be an entry: on an incremental store, a running conversation with its
 * folded messages at hand, once the store holds (`storedBytes`: base and entries) at least the
 * size below which a whole commit is as cheap.
 */
export function entryPossible(
  plan: CheckpointPlan,
  status: ConversationStatus,
  folds: boolean,
  storedBytes: number,
): boolean {
  return plan.incremental && status === 'running' && folds && storedBytes >= plan.wholeBelowBytes;
}

/**
 * Whether an entry of `bytes` is written rather than the whole state: within the store's
 * `maxCheckpointBytes`, and at most half of what it adds to (`storedBytes` plus itself). An entry
 * as large (a first commit after a long run on 'exit') is no cheaper than the whole state, which
 * also starts a new base.
 */
export function entryPays(bytes: number, storedBytes: number, maxCheckpointBytes: number): boolean {
  return bytes <= maxCheckpointBytes && bytes * 2 <= storedBytes + bytes;
}

/** What the session knows of the log when it decides on a snapshot. */
export interface LogState {
  /** A snapshot is in flight (one at a time). */
  readonly snapshotting: boolean;
  /** Bytes of the base (the whole checkpoint or snapshot the entries follow). */
  readonly baseBytes: number;
  /** Bytes of the entries after the base, the one being built included. */
  readonly logBytes: number;
  /** After a failed snapshot: the log bytes before the next is tried (0: none failed). */
  readonly retryAt: number;
  /** Dispatches since the base. */
  readonly dispatches: number;
}

/** Whether a snapshot goes with this entry: none in flight, none failed recently, and one due. */
export function snapshotWanted(plan: CheckpointPlan, log: LogState): boolean {
  return (
    !log.snapshotting &&
    log.logBytes >= log.retryAt &&
    snapshotDue(plan, log.baseBytes, log.logBytes, log.dispatches)
  );
}

/** After a snapshot covering `coveredBytes` of entries failed: the log bytes before the next try. */
export function snapshotRetryAt(coveredBytes: number): number {
  return coveredBytes * 1.25;
}

/**
 * The limit a whole commit meets: an incremental store bounds a whole state by its
 * `maxSnapshotBytes` (an entry by `maxCheckpointBytes`); another, every commit by
 * `maxCheckpointBytes`.
 */
export function wholeLimit(
  plan: CheckpointPlan,
  maxCheckpointBytes: number,
): { readonly max: number; readonly limit: 'maxSnapshotBytes' | 'maxCheckpointBytes' } {
  return plan.incremental
    ? { max: plan.maxSnapshotBytes, limit: 'maxSnapshotBytes' }
    : { max: maxCheckpointBytes, limit: 'maxCheckpointBytes' };
}

/**
 * The whole state at `p`, committed by segment `segment`, in the order the format has always
 * had (the text is unchanged).
 */
export function stateOf<S, C>(p: LoopPosition<S, C>, segment: number): CheckpointState<S, C> {
  return {
    v: 1,
    input: p.input,
    projection: p.projection,
    lastMessage: p.lastMessage,
    queue: p.queue,
    history: p.history,
    answering: p.answering,
    dispatchCount: p.dispatchCount,
    invocations: p.invocations,
    attempt: p.attempt,
    segment,
    elapsedMs: p.elapsedMs,
    usage: p.usage,
    termination: p.termination,
    turn: p.turn,
    observers: p.observers,
    suspended: p.suspended,
  };
}

/** A new conversation's first state (`observers`: what its observers saved at its creation). */
export function freshState<C>(
  input: Message<C>,
  observers: Readonly<Record<string, unknown>> | undefined,
): FreshState<C> {
  return observers === undefined
    ? { v: 1, input, fresh: true }
    : { v: 1, input, fresh: true, observers };
}

/** An ended conversation's state: its counters and what its observers saved. */
export function endedState(
  dispatchCount: number,
  segment: number,
  elapsedMs: number,
  observers: Readonly<Record<string, unknown>> | undefined,
): EndedState {
  return { v: 1, ended: true, dispatchCount, segment, elapsedMs, observers };
}

/** How a run's checkpoints are made: the checkpoint of `text` (and the ending's `result`) at `seq`. */
export type CheckpointMaker = (
  status: ConversationStatus,
  seq: number,
  dispatchCount: number,
  text: string,
  result: string | undefined,
) => Checkpoint;

/** The checkpoints of conversation `conversationId` of `orchestrator`. */
export function checkpointsOf(conversationId: string, orchestrator: string): CheckpointMaker {
  return (status, seq, dispatchCount, text, result) => ({
    conversationId,
    orchestrator,
    status,
    seq,
    dispatchCount,
    state: text,
    ...(result === undefined ? {} : { result }),
    ...(status === 'suspended' ? { suspendedAt: Date.now() } : {}),
  });
}

/**
 * The result text of a failure's ending: what failed, with the state it failed in, so resume()
 * tells it again. Without the state when the codec refuses it, or when it is `unstorable` (what
 * could not be stored).
 */
export function failureResult<S, C>(
  codec: CheckpointCodec,
  conversationId: string,
  error: ConversationError<S, C>,
  unstorable: boolean,
): string {
  try {
    if (unstorable) throw error;
    return codec.encode({
      conversationId,
      state: error.state,
      dispatchCount: error.dispatchCount,
      elapsedMs: error.elapsedMs,
      usage: error.usage,
      error: storedFailure(error),
    });
  } catch {
    return JSON.stringify({
      conversationId,
      dispatchCount: error.dispatchCount,
      elapsedMs: error.elapsedMs,
      error: storedFailure(error),
    });
  }
}

/**
 * The bytes of a new conversation's first state when they are past the conversation's bound
 * (`checkpoints.maxConversationBytes`, where it applies), else undefined.
 */
export function creationOutgrown(plan: CheckpointPlan, state: string): number | undefined {
  if (!(plan.incremental || plan.conversationBounded)) return undefined;
  if (state.length * 3 <= plan.maxConversationBytes) return undefined;
  const bytes = Buffer.byteLength(state);
  return bytes > plan.maxConversationBytes ? bytes : undefined;
}
