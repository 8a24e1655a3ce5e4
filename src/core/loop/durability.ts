/**
 * The loop's one door to durability. A run with a store talks to its store session
 * (core/durable/session.ts) through `RunDurability` and nothing else; the session reads the loop
 * through `DurableHost`. The loop knows no store, lease, codec nor checkpoint format: what it
 * hands over is its position (`LoopPosition`), what it gets back on a resume is a `Resumption`.
 * Without a store the run has no `RunDurability` at all, and none of this is touched.
 */
import type { ConversationError, FailurePoint } from '../spi/errors.ts';
import type { CheckpointWrite } from '../spi/observer.ts';
import type { Durability } from '../spi/store.ts';
import type {
  ConversationResult,
  ConversationSuspension,
  Message,
  UsageTotals,
} from '../spi/types.ts';

/** The usage ledger as stored: per-party totals and who reported. */
export interface StoredUsage {
  readonly total: UsageTotals;
  readonly byResponder: readonly (UsageTotals | null)[];
  readonly turnPolicy?: UsageTotals | undefined;
}

/** Where the loop stands between two steps: everything a resume needs to go on from there. */
export interface LoopPosition<S = unknown, C = unknown> {
  readonly input: Message<C>;
  readonly projection: S;
  readonly lastMessage: Message<C>;
  readonly queue: readonly Message<C>[];
  readonly history?: readonly Message<C>[] | undefined;
  /** The message being answered and the responders (indexes) still to answer it. */
  readonly answering?:
    | { readonly message: Message<C>; readonly next: readonly number[] }
    | undefined;
  readonly dispatchCount: number;
  /** Responder invocations so far (the idempotency keys' counter). */
  readonly invocations: number;
  /** The attempt of the next invocation (more than 1 after a crash resume). */
  readonly attempt: number;
  /** Active milliseconds so far. */
  readonly elapsedMs: number;
  readonly usage?: StoredUsage | undefined;
  readonly termination?: unknown;
  readonly turn?: unknown;
  /** Observers' saved data by key. */
  readonly observers?: Readonly<Record<string, unknown>> | undefined;
  readonly suspended?: { readonly responder: string; readonly payload: unknown } | undefined;
}

/** Why a stored conversation runs again (the observers' `resume.cause`). */
export type ResumeCause = 'crash' | 'abort' | 'suspend' | 'handoff' | 'cancel';

/** A stored conversation this run continues (resume, recover, cancel), as the loop sees it. */
export interface Resumption<S, C> {
  /** Where it stood; undefined when nothing had run (a fresh checkpoint). */
  readonly position: LoopPosition<S, C> | undefined;
  readonly cause: ResumeCause;
  /** This segment's number (1 for a conversation's first run). */
  readonly segment: number;
  /** Invocations the checkpoint holds: the next one is the call a crash may have cut. */
  readonly invocations: number;
  /** The attempt of that next invocation. */
  readonly attempt: number;
  /** Checkpoint entries folded onto the stored base to rebuild the position (0: stored whole). */
  readonly entries: number;
  /** The observers' saved data by key at the last commit (the creation's, when nothing ran). */
  readonly saved: Readonly<Record<string, unknown>> | undefined;
  /** The person's answer (`resume(id, { input })`). */
  readonly input?: Message<C> | undefined;
  /** Set by `cancel()`: the segment ends the conversation as aborted, running nothing. */
  readonly cancel?: { readonly reason: unknown } | undefined;
  /** Opens the store session that commits this segment. */
  open(host: DurableHost<S, C>): RunDurability<S, C>;
}

/** How a durable run opens its store session (a new conversation: created before it runs). */
export interface DurabilityOpener<S, C> {
  readonly mode: Durability;
  /** The store's name, for the observers. */
  readonly storeName: string;
  open(host: DurableHost<S, C>): RunDurability<S, C>;
}

/** Where a failing run was cut (the failure plan's `cutAt`). */
export type CutPoint =
  /** Waiting for a responder's promise: the point before that call can be committed. */
  | 'call'
  /** Between steps (waiting for a commit, yielded, right after a dispatch): a point as it is. */
  | 'between'
  /** Inside a step (a synchronous call, a fold, a policy): half of one step, never committed. */
  | 'inside';

/** The observers, as a commit tells them of itself (the run's `Observations`). */
export interface CommitObservers {
  /** Their saved data by key, stored with every checkpoint. */
  save(): Readonly<Record<string, unknown>> | undefined;
  /** A commit's duration, and its failure if it failed. */
  checkpointed(durationMs: number, error: unknown, failed: boolean): void;
  /** Whether `written` is heard (else a commit need not make its record). */
  readonly wantsWrites: boolean;
  /** A commit landed, or a snapshot landed or failed: what it wrote. */
  written(write: CheckpointWrite): void;
  /** Another process holds the conversation. */
  leaseConflict(): void;
}

/** What the store session reads of the run it commits. */
export interface DurableHost<S, C> extends FailurePoint<S, C> {
  readonly conversationId: string;
  /** The conversation's first message. */
  readonly input: Message<C>;
  /** Whether the run has settled (a late renewal answer is then ignored). */
  readonly settled: boolean;
  /** Responder invocations so far. */
  readonly invocations: number;
  readonly dispatchCount: number;
  /**
   * The messages folded since the last commit landed, in order (the session trims what lands):
   * what an incremental commit writes, the projection's `fold` rebuilding the rest on resume.
   */
  readonly folded: Message<C>[] | undefined;
  /** The run's observers now (a commit keeps the ones it started with). */
  readonly observations: CommitObservers;
  /** The position to commit; `reopen`: the responder call in flight is undone, to run again. */
  position(reopen: boolean): LoopPosition<S, C>;
  /** Cuts the run with `error` (its lease was lost). */
  interrupt(error: ConversationError<S, C>): void;
}

/** What a durable run asks of its store session. */
export interface RunDurability<S, C> {
  /** Stores a new conversation (its id reserved, its lease taken) before anything runs. */
  create(): Promise<void>;
  /** The run begins: its owner is live, its lease renewed while it runs. */
  begin(): void;
  /** Commits the position as running (`reopen`: the responder call in flight runs again). */
  commit(reopen?: boolean): Promise<void>;
  /** Whether no commit is in flight (group commit starts one only then). */
  readonly idle: boolean;
  /**
   * Commits the ending (`result`) or the suspension, after any commit in flight. Throws (now) a
   * CheckpointError when the result cannot be encoded.
   */
  settle(
    result: ConversationResult<S, C>,
    suspension: ConversationSuspension | undefined,
  ): Promise<void>;
  /**
   * The run failed with `error`, cut at `cutAt`: does with the store what the failure plan says.
   * Resolves with whether the store holds the conversation as ended (the observers' `ended`);
   * rejects with why a cancel's ending could not be committed. Undefined when the run holds
   * nothing in the store (nothing to do: not ended).
   */
  fail(
    error: ConversationError<S, C>,
    cutAt: CutPoint,
    draining: boolean,
  ): Promise<boolean> | undefined;
  /**
   * A durable ending's commit failed with `error`: lets go of the lease as that failure allows.
   * Undefined when there is nothing to wait for.
   */
  failedEnding(error: ConversationError<S, C>): Promise<void> | undefined;
  /** Stops the heartbeat (the run settled). */
  stop(): void;
  /** The run is over: its owner is no longer live. */
  end(): void;
}
