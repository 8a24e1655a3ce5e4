/**
 * A durable run's store session: the only place a run calls the store. It creates a new
 * conversation, commits the loop's position (as `durability` says, group commit included), renews
 * the lease on a heartbeat, commits endings and suspensions, and carries out the failure plan
 * (failure-plan.ts) when the run fails. The loop reaches it through `RunDurability` and is read
 * through `DurableHost` (core/loop/durability.ts): the loop knows no store, lease nor codec.
 */
import { performance } from 'node:perf_hooks';
import type {
  CutPoint,
  DurabilityOpener,
  DurableHost,
  Resumption,
  RunDurability,
} from '../loop/durability.ts';
import {
  CheckpointError,
  ConversationAbortedError,
  ConversationError,
  ConversationExistsError,
  ConversationLeaseError,
  describeCause,
  storedFailure,
} from '../spi/errors.ts';
import type { Checkpoint, ConversationStatus, Lease } from '../spi/store.ts';
import type { ConversationResult, ConversationSuspension } from '../spi/types.ts';
import {
  bounded,
  type CheckpointState,
  checkedOutcome,
  type EndedState,
  type FreshState,
  UnstorableValueError,
} from './checkpoint.ts';
import type { DurableConfig, Segment } from './config.ts';
import { planFailure } from './failure-plan.ts';
import { newLeaseOwner, setLeaseOwnerLive } from './lease-owner.ts';

/** How a durable orchestrator's new conversations open their store session. */
export function durabilityOpener<S, C>(
  durable: DurableConfig,
  orchestrator: string,
): DurabilityOpener<S, C> {
  return {
    mode: durable.durability,
    storeName: durable.store.name,
    open: (host) => new StoreSession(durable, orchestrator, host, undefined, 1, 0),
  };
}

/** The run of a stored conversation (`segment`, its decoded state `restored`), for the loop. */
export function resumption<S, C>(
  durable: DurableConfig,
  orchestrator: string,
  segment: Segment<C>,
  restored: CheckpointState<S, C> | FreshState<C>,
): Resumption<S, C> {
  const fresh = 'fresh' in restored;
  const number = (restored.segment ?? 1) + 1;
  const invocations = fresh ? 0 : restored.invocations;
  return {
    position: fresh ? undefined : restored,
    cause: segment.cancel
      ? 'cancel'
      : segment.takenOver
        ? 'crash'
        : segment.checkpoint.status === 'suspended'
          ? 'suspend'
          : 'handoff',
    segment: number,
    invocations,
    attempt: (restored.attempt ?? 1) + (segment.takenOver ? 1 : 0),
    input: segment.input,
    cancel: segment.cancel,
    open: (host) => new StoreSession(durable, orchestrator, host, segment, number, invocations),
  };
}

class StoreSession<S, C> implements RunDurability<S, C> {
  readonly #durable: DurableConfig;
  readonly #orchestrator: string;
  readonly #host: DurableHost<S, C>;
  readonly #segment: Segment<C> | undefined;
  readonly #segmentNumber: number;
  #owner: string | undefined;
  #lease: Lease | undefined;
  #seq = 0;
  /** Invocations the last landed commit holds: more in the run means work a release would hide. */
  #committedInvocations: number;
  #inflight: Promise<void> | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  /**
   * The CheckpointError of a state the codec refused or that outgrew the store's limit: no retry
   * can store it, so the conversation ends as failed instead of staying resumable.
   */
  #unstorable: CheckpointError<S, C> | undefined;

  constructor(
    durable: DurableConfig,
    orchestrator: string,
    host: DurableHost<S, C>,
    segment: Segment<C> | undefined,
    segmentNumber: number,
    invocations: number,
  ) {
    this.#durable = durable;
    this.#orchestrator = orchestrator;
    this.#host = host;
    this.#segment = segment;
    this.#segmentNumber = segmentNumber;
    this.#committedInvocations = invocations;
    if (segment !== undefined) {
      this.#owner = segment.owner;
      this.#lease = segment.lease;
      this.#seq = segment.checkpoint.seq;
    }
  }

  get idle(): boolean {
    return this.#inflight === undefined;
  }

  create(): Promise<void> {
    const durable = this.#durable;
    const host = this.#host;
    const owner = newLeaseOwner();
    // Live before the store sees it: a concurrent acquire must not take it for a dead one's.
    setLeaseOwnerLive(owner, true);
    const failed = (error: unknown): never => {
      setLeaseOwnerLive(owner, false);
      throw error;
    };
    let state: string;
    try {
      const fresh: FreshState<C> = { v: 1, input: host.input, fresh: true };
      state = durable.codec.encode(fresh);
    } catch (error) {
      return Promise.reject(this.#checkpointError(error, 'its input')).catch(failed);
    }
    const checkpoint: Checkpoint = {
      conversationId: host.conversationId,
      orchestrator: this.#orchestrator,
      status: 'running',
      seq: 1,
      dispatchCount: 0,
      state,
    };
    const store = durable.store;
    return bounded(
      () => store.create(checkpoint, owner, durable.leaseMs),
      durable.storeTimeoutMs,
      'create',
    )
      .then((outcome) => checkedOutcome(store, 'create', outcome))
      .then(
        (outcome) => {
          if (!outcome.created) failed(new ConversationExistsError(host.conversationId));
          else {
            this.#owner = owner;
            this.#lease = outcome.lease;
            this.#seq = 1;
          }
        },
        (error: unknown) => failed(this.#checkpointError(error, 'its creation')),
      );
  }

  begin(): void {
    if (this.#owner !== undefined) setLeaseOwnerLive(this.#owner, true);
    this.#heartbeat = setInterval(() => this.#renewIfIdle(), this.#durable.leaseMs / 3);
    this.#heartbeat.unref();
  }

  commit(reopen = false): Promise<void> {
    return this.#commit('running', undefined, reopen);
  }

  settle(
    result: ConversationResult<S, C>,
    suspension: ConversationSuspension | undefined,
  ): Promise<void> {
    // The question waits in the store with the conversation (a payload JSON cannot hold fails it).
    let text: string | undefined;
    if (suspension === undefined) {
      try {
        text = this.#durable.codec.encode(result);
      } catch (error) {
        throw this.#checkpointError(error, 'its result');
      }
    }
    // Suspensions and endings are committed whatever the durability, after any commit in flight.
    return this.#afterInflight(() =>
      this.#commit(suspension === undefined ? 'ended' : 'suspended', text),
    );
  }

  fail(
    error: ConversationError<S, C>,
    cutAt: CutPoint,
    draining: boolean,
  ): Promise<boolean> | undefined {
    const durable = this.#durable;
    const lease = this.#lease;
    // A durable run that failed before its creation landed stored nothing: no ending either.
    if (lease === undefined) return undefined;
    const host = this.#host;
    const segment = this.#segment;
    const cancel = segment?.cancel;
    const unstorable = error === this.#unstorable;
    const kept = (): boolean => false;
    const release = (): Promise<void> =>
      bounded(
        () => durable.store.release(host.conversationId, this.#lease ?? lease),
        durable.storeTimeoutMs,
        'release',
      );
    const crashMarkUnsaved = (): boolean =>
      segment?.takenOver === true && this.#seq === segment.checkpoint.seq;
    const unsaved = (): boolean =>
      host.invocations > this.#committedInvocations || crashMarkUnsaved();
    const plan = planFailure({
      leaseLost: error instanceof ConversationLeaseError,
      cancel: cancel !== undefined,
      unstorable,
      aborted: error instanceof ConversationAbortedError,
      storeFailed: error instanceof CheckpointError,
      cutAt,
      // A drain hands back at a commit point in every mode: with 'exit', what ran is committed
      // there too (the process leaves; another goes on from there, running nothing twice).
      exit: durable.durability === 'exit' && !draining,
      unsaved: host.invocations > this.#committedInvocations,
      crashMarkUnsaved: crashMarkUnsaved(),
      resumedUncommitted: segment !== undefined && this.#seq === segment.checkpoint.seq,
      takenOver: segment?.takenOver === true,
    });
    switch (plan) {
      case 'release':
        return this.#afterInflight(release).then(kept, kept);
      case 'lapse':
        return this.#afterInflight(() => Promise.resolve()).then(kept, kept);
      case 'reopen_then_release':
        return this.#afterInflight(() =>
          this.#commit('running', undefined, true).then(release),
        ).then(kept, kept);
      case 'commit_unsaved_then_release':
        // Read once the commit in flight has landed: it may hold what ran.
        return this.#afterInflight(() =>
          unsaved() ? this.#commit('running', undefined, false).then(release) : release(),
        ).then(kept, kept);
      case 'commit_ended':
        break;
    }
    // A failure is an ending: committed as ended with what failed, so resume() tells it again.
    // An unstorable state is not stored with its failure either (it is what could not be).
    let text: string;
    try {
      if (unstorable) throw error;
      text = durable.codec.encode({
        conversationId: host.conversationId,
        state: error.state,
        dispatchCount: error.dispatchCount,
        elapsedMs: error.elapsedMs,
        usage: error.usage,
        error: storedFailure(error),
      });
    } catch {
      text = JSON.stringify({
        conversationId: host.conversationId,
        dispatchCount: error.dispatchCount,
        elapsedMs: error.elapsedMs,
        error: storedFailure(error),
      });
    }
    return this.#afterInflight(() => this.#commit('ended', text)).then(
      () => true,
      (failed: unknown) => {
        // Not stored as ended: it stays running for recover(), which will end it again. cancel()
        // learns why it did not end (the store failed, another process took it).
        if (cancel === undefined) return false;
        throw failed;
      },
    );
  }

  failedEnding(error: ConversationError<S, C>): Promise<void> | undefined {
    const durable = this.#durable;
    const lease = this.#lease;
    // Dispatches the store does not hold (the last one, whose ending did not land) must not be
    // hidden by a clean release: the lease is left to lapse, so the next holder re-runs them with
    // the attempt raised, as after a crash.
    if (
      lease === undefined ||
      error instanceof ConversationLeaseError ||
      (durable.durability !== 'exit' && this.#host.invocations > this.#committedInvocations)
    ) {
      return undefined;
    }
    const done = (): void => {};
    return bounded(
      () => durable.store.release(this.#host.conversationId, lease),
      durable.storeTimeoutMs,
      'release',
    ).then(done, done);
  }

  stop(): void {
    if (this.#heartbeat !== undefined) {
      clearInterval(this.#heartbeat);
      this.#heartbeat = undefined;
    }
  }

  end(): void {
    if (this.#owner !== undefined) setLeaseOwnerLive(this.#owner, false);
  }

  #afterInflight<T>(next: () => Promise<T>): Promise<T> {
    const inflight = this.#inflight;
    return inflight === undefined ? next() : inflight.then(next, next);
  }

  /**
   * Commits the conversation's current state (`status`, with `result` text when it ended).
   * Resolves when the store has it; rejects with a CheckpointError (unstorable value, store
   * failure or timeout) or a ConversationLeaseError (refused: another process holds it).
   */
  #commit(status: ConversationStatus, result?: string, reopen = false): Promise<void> {
    const durable = this.#durable;
    const host = this.#host;
    let checkpoint: Checkpoint;
    try {
      checkpoint = this.#checkpoint(status, result, reopen);
    } catch (error) {
      return Promise.reject(error);
    }
    const started = performance.now();
    const invocations = reopen ? host.invocations - 1 : host.invocations;
    const lease = this.#lease as Lease;
    const observations = host.observations;
    const store = durable.store;
    const commit = bounded(
      () => store.commit(checkpoint, lease, durable.leaseMs),
      durable.storeTimeoutMs,
      `commit (seq ${checkpoint.seq})`,
    )
      .then((outcome) => checkedOutcome(store, 'commit', outcome))
      .then(
        (outcome) => {
          observations.checkpointed(performance.now() - started, undefined, false);
          if (!outcome.ok) {
            observations.leaseConflict();
            throw outcome.reason === 'not_found'
              ? this.#deleted()
              : this.#leaseLost(`its commit was refused (${outcome.reason})`);
          }
          this.#seq = checkpoint.seq;
          this.#lease = outcome.lease;
          this.#committedInvocations = invocations;
        },
        async (error: unknown) => {
          // A commit whose answer was lost (a timeout, a dropped connection) may have landed:
          // asked once, so that a stored ending is not run again by recover() nor left uncounted,
          // and a stored dispatch is counted and goes on (it would not run again on resume). A
          // running checkpoint counts as ours only while our lease still holds it.
          if (await landed(durable, checkpoint, status === 'running' ? lease.owner : undefined)) {
            observations.checkpointed(performance.now() - started, undefined, false);
            this.#seq = checkpoint.seq;
            this.#committedInvocations = invocations;
            return;
          }
          observations.checkpointed(performance.now() - started, error, true);
          throw this.#checkpointError(error, `the commit of dispatch ${checkpoint.dispatchCount}`);
        },
      );
    this.#inflight = commit;
    const done = (): void => {
      if (this.#inflight === commit) this.#inflight = undefined;
    };
    commit.then(done, done);
    return commit;
  }

  /**
   * The checkpoint of the conversation as it stands (a consistent point: between steps). With
   * `reopen`, a responder's call is open (the run was cut while it ran): the checkpoint is the
   * point before that call, its attempt raised, so the call runs again with its key and attempt > 1.
   */
  #checkpoint(status: ConversationStatus, result: string | undefined, reopen: boolean): Checkpoint {
    const host = this.#host;
    const codec = this.#durable.codec;
    let text: string;
    try {
      if (status === 'ended') {
        const ended: EndedState = {
          v: 1,
          ended: true,
          dispatchCount: host.dispatchCount,
          segment: this.#segmentNumber,
          elapsedMs: host.elapsedMs(),
          // Saved as at every commit: an observer counts what this commit stores when it lands.
          observers: host.observations.save(),
        };
        text = codec.encode(ended);
      } else {
        const p = host.position(reopen);
        // Field by field, in the order the format has always had (the stored text is unchanged).
        const state: CheckpointState<S, C> = {
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
          segment: this.#segmentNumber,
          elapsedMs: p.elapsedMs,
          usage: p.usage,
          termination: p.termination,
          turn: p.turn,
          observers: p.observers,
          suspended: p.suspended,
        };
        text = codec.encode(state);
      }
    } catch (error) {
      throw this.#checkpointError(error, `dispatch ${host.dispatchCount}`, true);
    }
    return this.#checkpointOf(status, text, result);
  }

  /** The checkpoint to commit, once its size is checked against the store's limit. */
  #checkpointOf(status: ConversationStatus, text: string, result: string | undefined): Checkpoint {
    const host = this.#host;
    const max = this.#durable.maxCheckpointBytes;
    const bytes = Buffer.byteLength(text) + (result === undefined ? 0 : Buffer.byteLength(result));
    if (bytes > max) {
      const error = new CheckpointError<S, C>(
        `Conversation ${host.conversationId} could not be checkpointed at dispatch ${host.dispatchCount}: expected at most ${max} bytes (the store's maxCheckpointBytes), got ${bytes}`,
        host.state(),
        host.elapsedMs(),
      );
      this.#unstorable = error;
      throw error;
    }
    return {
      conversationId: host.conversationId,
      orchestrator: this.#orchestrator,
      status,
      seq: this.#seq + 1,
      dispatchCount: host.dispatchCount,
      state: text,
      ...(result === undefined ? {} : { result }),
      ...(status === 'suspended' ? { suspendedAt: Date.now() } : {}),
    };
  }

  /**
   * A CheckpointError naming the conversation, where it was and the offending value's path.
   * `refused`: `error` is the codec's refusal of the state to commit (not a store's failure): the
   * value will be refused every time, so the conversation ends rather than stays resumable.
   */
  #checkpointError(error: unknown, at: string, refused = false): ConversationError<S, C> {
    if (error instanceof ConversationError) return error as ConversationError<S, C>;
    const host = this.#host;
    const path = error instanceof UnstorableValueError ? error.path : undefined;
    const checkpointError = new CheckpointError<S, C>(
      `Conversation ${host.conversationId} could not be checkpointed at ${at}: ${describeCause(error)}`,
      host.state(),
      host.elapsedMs(),
      path,
      error,
    );
    if (refused) this.#unstorable = checkpointError;
    return checkpointError;
  }

  /** The conversation was deleted from the store while this process ran it. */
  #deleted(): ConversationLeaseError<S, C> {
    const host = this.#host;
    return new ConversationLeaseError(
      `Conversation ${host.conversationId} was deleted from the store while it ran (its commit found no such conversation); this process stopped at dispatch ${host.dispatchCount} and invokes no more responders`,
      host.state(),
      host.elapsedMs(),
    );
  }

  #leaseLost(why: string): ConversationLeaseError<S, C> {
    const host = this.#host;
    return new ConversationLeaseError(
      `Conversation ${host.conversationId} is held by another process: ${why}; this process stopped at dispatch ${host.dispatchCount} and invokes no more responders`,
      host.state(),
      host.elapsedMs(),
    );
  }

  /**
   * The heartbeat, every `leaseMs / 3`: renews the lease unless a commit (which renews it) is in
   * flight. Renewing at every beat, not only when no commit renewed it for a third of the lease,
   * keeps the lease alive however the beats and commits fall: the next renewal starts at most
   * `leaseMs / 3` after the last one landed and lands within `storeTimeoutMs` (at most
   * `leaseMs / 2`, checked at construction), before the lease expires.
   */
  #renewIfIdle(): void {
    const host = this.#host;
    if (host.settled || this.#inflight !== undefined) return;
    const durable = this.#durable;
    const lease = this.#lease as Lease;
    const store = durable.store;
    bounded(
      () => store.renew(host.conversationId, lease, durable.leaseMs),
      durable.storeTimeoutMs,
      'renew',
    )
      .then((renewed) => checkedOutcome(store, 'renew', renewed))
      .then(
        (renewed) => {
          if (host.settled) return;
          if (renewed === undefined) {
            host.observations.leaseConflict();
            host.interrupt(this.#leaseLost('its lease renewal was refused'));
          } else if (this.#lease === lease) this.#lease = renewed;
        },
        // A renewal that fails is tried again at the next beat; the commit will tell if it is lost.
        () => {},
      );
  }
}

/**
 * Whether `checkpoint` is what the store holds (its status at its seq): a commit whose answer was
 * lost may have been applied. `false` when the store cannot tell within `storeTimeoutMs`.
 */
async function landed(
  durable: DurableConfig,
  checkpoint: Checkpoint,
  owner: string | undefined,
): Promise<boolean> {
  try {
    const stored = await bounded(
      () => durable.store.get(checkpoint.conversationId),
      durable.storeTimeoutMs,
      'get',
    );
    return (
      typeof stored === 'object' &&
      stored !== null &&
      stored.seq === checkpoint.seq &&
      stored.status === checkpoint.status &&
      (owner === undefined || stored.owner === owner)
    );
  } catch {
    return false;
  }
}
