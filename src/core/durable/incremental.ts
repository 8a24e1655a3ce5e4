/**
 * Incremental checkpoints (docs/durability.md, "What a checkpoint holds"). On a store with
 * `append` and `snapshot`, a commit of a long conversation writes an entry: the messages folded
 * since the previous commit and the small rest of the loop's position (counters, queue, policies'
 * and observers' saved state), never the projection nor the history. Now and then the whole state
 * is written as a snapshot, behind which the store drops the entries. A resume folds the entries
 * after the base with the projection's own `fold` (pure, as replay relies on too).
 *
 * This module holds the entry format, its check, the fold on resume, and when to snapshot.
 */
import type { LoopPosition } from '../loop/durability.ts';
import { describeValue } from '../spi/errors.ts';
import type { Message, Projection } from '../spi/types.ts';
import type { AbortMark, CheckpointState, FreshState } from './checkpoint.ts';
import { isStoredMessage, MESSAGE } from './checkpoint-check.ts';

/** One commit's entry, as the codec encodes it. */
export interface EntryState<C = unknown> {
  /** Format version. */
  readonly v: 1;
  readonly entry: true;
  /** The messages folded since the previous commit, in order. */
  readonly folded: readonly Message<C>[];
  /** The last folded message; absent when it is the last of `folded`. */
  readonly lastMessage?: Message<C> | undefined;
  /**
   * The queue's front: the messages before the last `queueTail` of `folded`, which end it. With
   * `queueDrop`, only what follows the previous commit's queue: the queue is then the previous
   * commit's without its first `queueDrop` messages (answered since), then these, then the tail.
   */
  readonly queue: readonly Message<C>[];
  readonly queueTail: number;
  /**
   * How many messages of the previous commit's queue were taken off its front since: set, the
   * entry holds what the queue gained, not the queue (an entry stays the size of what the
   * dispatch added however long the queue's backlog).
   */
  readonly queueDrop?: number | undefined;
  readonly answering?: LoopPosition<unknown, C>['answering'];
  readonly dispatchCount: number;
  readonly invocations: number;
  readonly attempt: number;
  readonly segment: number;
  readonly elapsedMs: number;
  readonly usage?: LoopPosition['usage'];
  readonly termination?: unknown;
  readonly turn?: unknown;
  readonly observers?: Readonly<Record<string, unknown>> | undefined;
  /** Set on the last commit written again by a segment an abort cut (see `AbortMark`). */
  readonly interrupted?: AbortMark | undefined;
}

/**
 * How many messages of `previous` (the last commit's queue) were taken off its front, when
 * `front` starts with the rest of it (the same message objects): a queue only loses messages at
 * its front and gains them at its back. Else (it was rebuilt) all of them.
 */
function droppedFrom<C>(previous: readonly Message<C>[], front: readonly Message<C>[]): number {
  if (front.length === 0) return previous.length;
  const at = previous.indexOf(front[0] as Message<C>);
  if (at < 0 || previous.length - at > front.length) return previous.length;
  for (let i = at + 1; i < previous.length; i++) {
    if (previous[i] !== front[i - at]) return previous.length;
  }
  return at;
}

/**
 * The entry of `position`, the loop having folded `folded` since the last commit; `previous`:
 * the queue that commit stored (running, this segment), when the entry may be written against it.
 */
export function entryOf<S, C>(
  position: LoopPosition<S, C>,
  folded: readonly Message<C>[],
  segment: number,
  previous?: readonly Message<C>[],
): EntryState<C> {
  const queue = position.queue;
  // The queue ends with the answers not yet answered: the same messages as folded's tail.
  let tail = 0;
  const most = Math.min(queue.length, folded.length);
  while (tail < most && queue[queue.length - 1 - tail] === folded[folded.length - 1 - tail]) tail++;
  const last = folded.length === 0 ? undefined : folded[folded.length - 1];
  let front = tail === 0 ? queue : queue.slice(0, queue.length - tail);
  let queueDrop: number | undefined;
  if (previous !== undefined) {
    queueDrop = droppedFrom(previous, front);
    front = front.slice(previous.length - queueDrop);
  }
  return {
    v: 1,
    entry: true,
    folded,
    lastMessage: position.lastMessage === last ? undefined : position.lastMessage,
    queue: front,
    queueTail: tail,
    ...(queueDrop === undefined ? {} : { queueDrop }),
    answering: position.answering,
    dispatchCount: position.dispatchCount,
    invocations: position.invocations,
    attempt: position.attempt,
    segment,
    elapsedMs: position.elapsedMs,
    usage: position.usage,
    termination: position.termination,
    turn: position.turn,
    observers: position.observers,
  };
}

function bad(at: number, field: string, expected: string, value: unknown): never {
  throw new TypeError(
    `expected entry ${at}'s \`${field}\` to be ${expected}, got ${describeValue(value)}`,
  );
}

/**
 * A decoded entry, checked for what the fold reads (`at`: its place after the base, for the
 * error); the rest of the position is checked with the whole state it rebuilds (`checkedState`).
 */
export function checkedEntry<C>(value: unknown, at: number): EntryState<C> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    bad(at, '$', 'an object', value);
  }
  const entry = value as Record<string, unknown>;
  if (entry.v !== 1 || entry.entry !== true) {
    bad(at, 'v', '1, with `entry: true` (the entry format this version writes)', entry.v);
  }
  for (const field of ['folded', 'queue'] as const) {
    const list = entry[field];
    if (!Array.isArray(list)) bad(at, field, 'an array of messages', list);
    list.forEach((m: unknown, i) => {
      if (!isStoredMessage(m)) bad(at, `${field}[${i}]`, MESSAGE, m);
    });
  }
  const folded = entry.folded as unknown[];
  const tail = entry.queueTail;
  if (typeof tail !== 'number' || !Number.isSafeInteger(tail) || tail < 0 || tail > folded.length) {
    bad(at, 'queueTail', `an integer from 0 to ${folded.length} (the folded messages)`, tail);
  }
  if (entry.lastMessage !== undefined && !isStoredMessage(entry.lastMessage)) {
    bad(at, 'lastMessage', 'a message or absent', entry.lastMessage);
  }
  if (entry.lastMessage === undefined && folded.length === 0) {
    bad(at, 'lastMessage', 'a message (nothing was folded)', entry.lastMessage);
  }
  if (entry.interrupted !== undefined && entry.interrupted !== 'abort') {
    bad(at, 'interrupted', "'abort' or absent", entry.interrupted);
  }
  const drop = entry.queueDrop;
  if (drop !== undefined && (typeof drop !== 'number' || !Number.isSafeInteger(drop) || drop < 0)) {
    bad(at, 'queueDrop', 'a non-negative integer or absent', drop);
  }
  return value as EntryState<C>;
}

/**
 * The entry that writes `last` (the last entry the store holds) again, marked as cut by an
 * abort: it folds nothing (its messages are folded already), so the position it comes to is
 * `last`'s, with its queue whole.
 */
export function abortMarkedEntry<C>(last: EntryState<C>): EntryState<C> {
  const folded = last.folded;
  return {
    ...last,
    folded: [],
    lastMessage: last.lastMessage ?? (folded[folded.length - 1] as Message<C>),
    // The queue `last` came to, as it is: nothing taken off, nothing added.
    queue: [],
    queueTail: 0,
    queueDrop: 0,
    interrupted: 'abort',
  };
}

/** What resume needs of the orchestrator to fold entries. */
export interface FoldConfig<S, C> {
  readonly projection: Projection<S, C>;
  readonly historySize: number;
}

/**
 * The position a base (snapshot, whole checkpoint or fresh one) and the entries after it come to:
 * the projection folds every message of every entry in order (a fresh base starts from
 * `initial(input)`), the history keeps its last `historySize`, and the rest is the last entry's.
 * Throws what the projection throws.
 */
export function foldEntries<S, C>(
  config: FoldConfig<S, C>,
  base: CheckpointState<S, C> | FreshState<C>,
  entries: readonly EntryState<C>[],
): CheckpointState<S, C> {
  const fresh = 'fresh' in base;
  let projection = fresh ? config.projection.initial(base.input) : base.projection;
  const size = config.historySize;
  let history: Message<C>[] | undefined;
  if (size > 0) history = fresh ? [base.input] : [...(base.history ?? [])];
  let lastMessage: Message<C> = fresh ? base.input : base.lastMessage;
  // A fresh base's queue is its input, as the loop starts it.
  let queue: Message<C>[] = fresh ? [base.input] : [...base.queue];
  const fold = config.projection.fold;
  let at = 0;
  for (const entry of entries) {
    at++;
    const folded = entry.folded;
    const tail = folded.slice(folded.length - entry.queueTail);
    const drop = entry.queueDrop;
    if (drop === undefined) queue = [...entry.queue, ...tail];
    else {
      if (drop > queue.length) {
        throw new TypeError(
          `expected entry ${at}'s \`queueDrop\` to be at most the queue it follows (${queue.length} messages), got ${drop}`,
        );
      }
      queue = [...queue.slice(drop), ...entry.queue, ...tail];
    }
    for (let i = 0; i < folded.length; i++) {
      const message = folded[i] as Message<C>;
      projection = fold.call(config.projection, projection, message);
      history?.push(message);
    }
    if (history !== undefined && history.length > size * 2)
      history.splice(0, history.length - size);
    lastMessage = entry.lastMessage ?? (folded[folded.length - 1] as Message<C>);
  }
  if (history !== undefined && history.length > size) history.splice(0, history.length - size);
  const last = entries[entries.length - 1] as EntryState<C>;
  return {
    v: 1,
    input: base.input,
    projection,
    lastMessage,
    queue,
    history,
    answering: last.answering,
    dispatchCount: last.dispatchCount,
    invocations: last.invocations,
    attempt: last.attempt,
    segment: last.segment,
    elapsedMs: last.elapsedMs,
    usage: last.usage,
    termination: last.termination,
    turn: last.turn,
    observers: last.observers,
  };
}

/** When a long conversation commits entries and writes snapshots (the `checkpoints` option). */
export interface CheckpointPlan {
  /** Whether the store takes entries and the orchestrator wants them. */
  readonly incremental: boolean;
  /** A state below this many bytes is committed whole (as cheap as an entry). */
  readonly wholeBelowBytes: number;
  /** A snapshot after this many dispatches since the base. */
  readonly snapshotEveryDispatches: number;
  /**
   * A snapshot once the entries since the base hold this many bytes; undefined:
   * `SNAPSHOT_LOG_RATIO` times what the base holds, at least `MIN_SNAPSHOT_LOG_BYTES` (so that
   * snapshots cost a fixed share of what is written, whatever the conversation's length).
   */
  readonly snapshotEveryBytes: number | undefined;
  /** The largest a conversation may grow: its base plus the entries after it, in bytes. */
  readonly maxConversationBytes: number;
  /**
   * Set by the user (`checkpoints.maxConversationBytes`): then a store writing every commit whole
   * is bounded by it too (otherwise its `maxCheckpointBytes` bounds a whole commit).
   */
  readonly conversationBounded: boolean;
  /** The largest snapshot or whole checkpoint the store takes. */
  readonly maxSnapshotBytes: number;
}

/** With the automatic rule, the entries since the base may hold at least this before a snapshot. */
export const MIN_SNAPSHOT_LOG_BYTES = 1024 * 1024;

/**
 * With the automatic rule, a snapshot once the entries since the base hold this many times the
 * base's bytes: a snapshot then writes at most (1 + 1/4) of the bytes it covers again, so the
 * bytes written per dispatch stay within a quarter of the entries' whatever the length, and a
 * resume reads about the state's size (the base and entries mostly of new messages).
 */
export const SNAPSHOT_LOG_RATIO = 4;

/** Whether a snapshot is due, `logBytes` and `dispatches` since a base of `baseBytes`. */
export function snapshotDue(
  plan: CheckpointPlan,
  baseBytes: number,
  logBytes: number,
  dispatches: number,
): boolean {
  if (dispatches >= plan.snapshotEveryDispatches) return true;
  const every =
    plan.snapshotEveryBytes ?? Math.max(MIN_SNAPSHOT_LOG_BYTES, baseBytes * SNAPSHOT_LOG_RATIO);
  return logBytes >= every;
}
