/**
 * One segment of a conversation, independent of the job engine: given a payload, run the
 * conversation through the core's durable API (`run` / `resume`, which take the store's lease and
 * fence every commit) until it ends or suspends, and say how it stands. The BullMQ adapter
 * (worker.ts) maps the outcome onto job moves; an adapter for another engine (a Temporal activity,
 * a Restate handler) calls `runSegment` the same way. The engine promises to deliver a payload at
 * least once; the store's fencing makes running it more than once harmless.
 */

import { newLeaseOwner } from '../core/durable/lease-owner.ts';
import { ConversationLeaseError } from '../core/spi/errors.ts';
import type { ConversationStore, StoredConversation } from '../core/spi/store.ts';
import type { Message, ResumeOptions, RunOptions } from '../core/spi/types.ts';
import { UnknownOrchestratorError } from './errors.ts';
import { ForeignPayloadError, type SegmentPayload } from './payload.ts';
import { withTrace } from './trace.ts';

/**
 * What the fleet needs of an orchestrator: its name and the core's durable `run` and `resume`, as
 * a `ConversationOrchestrator<S, C>` has them (`C` is its messages' content type).
 */
export interface FleetOrchestrator<C = unknown> {
  /** The orchestrator's name: jobs are matched to orchestrators by it. */
  readonly name: string;
  /**
   * True when it checkpoints to a store (a `ConversationOrchestrator` built with `store`): a
   * worker refuses any other, whose results it would have nowhere to keep.
   */
  readonly durable: boolean;
  /** Starts a durable conversation with this id (rejects `ConversationExistsError` when taken). */
  run(input: Message<C>, options: FleetRunOptions): Promise<unknown>;
  /** Goes on from the conversation's last checkpoint, with a person's answer first when given. */
  resume(conversationId: string, options?: ResumeOptions<C>): Promise<unknown>;
}

/** What a segment passes to `FleetOrchestrator.run()`: the core's run options, the id always set. */
export type FleetRunOptions = Pick<RunOptions, 'signal' | 'drain'> & {
  /** The conversation's id, as the producer gave it to `queue.start()`. */
  readonly conversationId: string;
};

/** How a segment left its conversation. */
export type SegmentOutcome =
  /** The conversation has ended (completed or failed): nothing more to run. */
  | {
      /** Ended. */
      readonly status: 'ended';
      /** Its dispatches in all. */
      readonly dispatchCount: number;
    }
  /** It waits for a person: `seq` is the suspended checkpoint's commit sequence. */
  | {
      /** Suspended. */
      readonly status: 'suspended';
      /** The suspended checkpoint's commit sequence: what a resume answers. */
      readonly seq: number;
      /** Its dispatches so far. */
      readonly dispatchCount: number;
    }
  /** The segment was stopped (a drain) at a commit point: run it again elsewhere. */
  | {
      /** Handed back. */
      readonly status: 'handed_back';
    }
  /** Another live holder has the lease (or took it from us): try again at `retryAt`. */
  | {
      /** Held elsewhere. */
      readonly status: 'held';
      /** Epoch milliseconds: when the other holder's lease expires (look again then). */
      readonly retryAt: number;
      /** True when our own run lost its lease mid-segment (we were paused, another took over). */
      readonly fenced: boolean;
    }
  /** Nothing to do: a resume for a suspension already answered, or a conversation gone. */
  | {
      /** Nothing done. */
      readonly status: 'stale';
      /** Why, in a sentence. */
      readonly reason: string;
      /** What the store holds, when it holds the conversation. */
      readonly stored?: StoredConversation;
    };

/** What `runSegment` runs a payload with. */
export interface SegmentContext {
  /** The store every worker shares. */
  readonly store: ConversationStore;
  /** The orchestrators this process runs, by name. */
  readonly orchestrators: ReadonlyMap<string, FleetOrchestrator>;
  /** Aborted when a drain's time is up: the run is cut at once and stays resumable. */
  readonly signal: AbortSignal;
  /**
   * Aborted when the worker begins to drain: the run lets the call in flight finish, commits it
   * and hands the conversation back there (nothing runs twice on the next worker).
   */
  readonly drain?: AbortSignal;
  /** Called just before a person's answer is handed to the core (the adapter drops its marker). */
  readonly onAnswering?: (suspension: number) => Promise<void>;
}

/** The drain option of a run or resume, when the worker gave one. */
function drainOf(ctx: SegmentContext): { drain?: AbortSignal } {
  return ctx.drain === undefined ? {} : { drain: ctx.drain };
}

/** The person's answer of a resume payload, when it has one (parsePayload checked it is a message). */
function inputOf(payload: SegmentPayload): { input?: Message } {
  return payload.input === undefined ? {} : { input: payload.input as Message };
}

/** Ending retry: when a held lease gives no expiry, look again after this long. */
const HELD_RETRY_MS = 1_000;

/**
 * Runs one segment. Resolves with the outcome; rejects only when it could not find out how the
 * conversation stands (the store or Redis unreachable): the engine retries later, and the run
 * goes on from the last commit. An `UnknownOrchestratorError` or a `ForeignPayloadError` must not
 * be retried.
 */
export async function runSegment(
  payload: SegmentPayload,
  ctx: SegmentContext,
): Promise<SegmentOutcome> {
  const { store, signal } = ctx;
  const id = payload.conversationId;
  const orchestrator = ctx.orchestrators.get(payload.orchestrator);
  if (orchestrator === undefined) {
    const error = new UnknownOrchestratorError(payload.orchestrator, [...ctx.orchestrators.keys()]);
    await markFailed(store, id, error);
    throw error;
  }
  const stored = await store.get(id);
  if (stored !== undefined && stored.orchestrator !== payload.orchestrator) {
    throw new ForeignPayloadError(
      `The job names orchestrator ${JSON.stringify(payload.orchestrator)} but conversation ${JSON.stringify(id)} belongs to ${JSON.stringify(stored.orchestrator)}`,
    );
  }
  const traced = <T>(fn: () => Promise<T>) => withTrace(payload.trace, fn);

  if (payload.kind === 'start' && stored === undefined) {
    return settle(ctx, id, () =>
      traced(() =>
        // parsePayload checked it is a message, as the core's run() checks again.
        orchestrator.run(payload.input as Message, { conversationId: id, signal, ...drainOf(ctx) }),
      ),
    );
  }
  if (stored === undefined) {
    return { status: 'stale', reason: `conversation ${JSON.stringify(id)} is not in the store` };
  }
  if (payload.kind === 'resume') {
    const suspension = payload.suspension;
    if (stored.status === 'suspended' && (suspension === undefined || stored.seq === suspension)) {
      await ctx.onAnswering?.(stored.seq);
      return settle(
        ctx,
        id,
        () =>
          traced(() => orchestrator.resume(id, { ...inputOf(payload), signal, ...drainOf(ctx) })),
        stored.seq,
      );
    }
    if (stored.status !== 'running') {
      return {
        status: 'stale',
        reason: `suspension ${suspension ?? '?'} of ${JSON.stringify(id)} was already answered`,
        stored,
      };
    }
    // Running past the suspension: this job's answer was applied before a crash; go on.
  }
  return continueFrom(ctx, stored, () =>
    traced(() => orchestrator.resume(id, { signal, ...drainOf(ctx) })),
  );
}

function continueFrom(
  ctx: SegmentContext,
  stored: StoredConversation,
  resume: () => Promise<unknown>,
): Promise<SegmentOutcome> | SegmentOutcome {
  if (stored.status === 'ended') return { status: 'ended', dispatchCount: stored.dispatchCount };
  if (stored.status === 'suspended') {
    return { status: 'suspended', seq: stored.seq, dispatchCount: stored.dispatchCount };
  }
  return settle(ctx, stored.conversationId, resume);
}

/** Runs the core call and reads back how the conversation stands, whatever the call answered. */
async function settle(
  ctx: SegmentContext,
  id: string,
  call: () => Promise<unknown>,
  answering?: number,
): Promise<SegmentOutcome> {
  let failure: unknown;
  try {
    await call();
  } catch (error) {
    failure = error;
  }
  const name = failure instanceof Error ? failure.name : undefined;
  // A run refused because the id was created meanwhile (a racing zombie of a stalled start):
  // what is stored decides, as for a continuation.
  const after = await ctx.store.get(id);
  if (after === undefined) {
    if (failure !== undefined && name !== 'ConversationNotFoundError') throw failure;
    return { status: 'stale', reason: `conversation ${JSON.stringify(id)} is not in the store` };
  }
  if (after.status === 'ended') return { status: 'ended', dispatchCount: after.dispatchCount };
  // A person's answer that did not get in because the store failed (before the resume's first
  // commit): still waiting on that very suspension, so the job fails and BullMQ retries it, answer
  // and all. (An answer the conversation refuses, its fold throwing, is not retried.)
  if (
    answering !== undefined &&
    name === 'CheckpointError' &&
    after.status === 'suspended' &&
    after.seq === answering &&
    !ctx.signal.aborted
  ) {
    throw failure;
  }
  if (
    after.status === 'suspended' &&
    (failure === undefined || name !== 'ConversationLeaseError')
  ) {
    return { status: 'suspended', seq: after.seq, dispatchCount: after.dispatchCount };
  }
  if (ctx.signal.aborted || ctx.drain?.aborted === true) return { status: 'handed_back' };
  if (name === 'ConversationExistsError') {
    return settle(ctx, id, () =>
      (ctx.orchestrators.get(after.orchestrator) as FleetOrchestrator).resume(id, {
        signal: ctx.signal,
      }),
    );
  }
  if (name === 'ConversationLeaseError' || (failure === undefined && after.status === 'running')) {
    const fenced = isFenced(failure);
    return {
      status: 'held',
      retryAt: Math.max(Date.now() + 50, after.leaseExpiresAt ?? Date.now() + HELD_RETRY_MS),
      fenced,
    };
  }
  if (failure !== undefined) throw failure;
  return { status: 'suspended', seq: after.seq, dispatchCount: after.dispatchCount };
}

/**
 * Whether a lease error says our own run lost its lease mid-way (a commit or a renewal refused:
 * we were paused and another process took over). The core names the live holder only when it
 * refused to start (the store told who holds it); a run that lost its lease cannot know who.
 */
function isFenced(error: unknown): boolean {
  return error instanceof ConversationLeaseError && error.holder === undefined;
}

/**
 * Marks a stored conversation failed (an orchestrator no worker runs): takes its lease and commits
 * it as ended with the failure as its result. Nothing when it is not stored, has ended, or is held.
 */
export async function markFailed(
  store: ConversationStore,
  conversationId: string,
  error: Error,
): Promise<boolean> {
  const owner = newLeaseOwner();
  const acquired = await store.acquire(conversationId, owner, 10_000);
  if (acquired.status !== 'acquired') return false;
  const checkpoint = acquired.checkpoint;
  // The core's shape of a failed ending (what `resume()` then rejects with): no state is known
  // here, the core puts an empty one in its place.
  const result = JSON.stringify({
    conversationId,
    decision: { terminate: true, reason: 'error' },
    dispatchCount: checkpoint.dispatchCount,
    elapsedMs: 0,
    error: { name: error.name, message: error.message, reason: 'error' },
  });
  const committed = await store.commit(
    { ...checkpoint, status: 'ended', seq: checkpoint.seq + 1, result, suspendedAt: undefined },
    acquired.lease,
    10_000,
  );
  return committed.ok;
}
