/**
 * One conversation, part 3 of 3: how a run starts and how it ends (run-state.ts holds its state,
 * steps.ts its steps). The queue loop of DESIGN §1.
 *
 * How to read it:
 * - `pump()` runs `step()` until a step must wait for a promise, the run ends, or the event loop
 *   is owed a turn (every `yieldIntervalMs`, on every path: sync answers, already-resolved
 *   promises and async turn policies alike, since promise continuations never let timers run).
 * - `step()` is one step: take the next message and ask the turn policy who answers it
 *   (`selectNext` (steps.ts)), or invoke the next selected responder (`dispatch`) and complete its dispatch
 *   (`completeDispatch`: fold, decide, tell the observers, call the listener).
 * - When a step gets a promise it answers WAIT; the promise's callbacks (`afterWait`) finish the
 *   same step and go back to `pump()`.
 * - Failures travel one way: thrown as a `ConversationError` (built in errors.ts) and handed to
 *   `fail()` (here). Aborts and deadlines arrive from outside the loop and call `fail()` (here) directly.
 * - Once the run has settled (`_settled`), nothing more happens for it: every step checks after
 *   calling user code (which may abort the run), and late promise answers are ignored.
 * - Token usage joins in one place, `reportUsage()`, called by the contexts responders and the turn
 *   policy get (context.ts); the ledger that counts it (usage.ts) is made on the first report, so
 *   a conversation where nothing reports only copies one shared zero totals object per snapshot.
 */
import { performance } from 'node:perf_hooks';
import { warnUnsaved } from '../shared/warnings.ts';
import {
  ConversationAbortedError,
  ConversationError,
  PolicyError,
  settleUsage,
  unexpectedFailure,
} from '../spi/errors.ts';
import type { ConversationEnd, ConversationResume } from '../spi/observer.ts';
import { CONTINUE } from '../spi/policy.ts';
import type {
  ConversationResult,
  ConversationSuspension,
  TerminationDecision,
} from '../spi/types.ts';
import { InvocationContext } from './context.ts';
import type {
  CutPoint,
  DurabilityOpener,
  DurableHost,
  LoopPosition,
  Resumption,
  RunDurability,
} from './durability.ts';
import { Observations } from './observations.ts';
import { type CallOptions, WAITING_FOR_COMMIT } from './run-state.ts';
import { onAbort } from './signals.ts';
import { ENDED, LoopSteps, NEXT, type Step, WAIT } from './steps.ts';
import { UsageLedger } from './usage.ts';

export type { CallOptions };

/** What a settled run resolves or rejects: nothing more. */
const settledAlready = (): void => {};
/** What a settled run observes: nobody. */
const NO_OBSERVATIONS = new Observations<unknown, unknown>([], {
  orchestrator: '',
  conversationId: '',
  input: { sender: '', content: undefined },
  responders: [],
  startTimeMs: 0,
});

export class ConversationRun<S, C> extends LoopSteps<S, C> implements DurableHost<S, C> {
  /** The caller aborted or a deadline passed: settle now, then abort the running responder. */
  override interrupt(error: ConversationError<S, C>): void {
    if (this._settled) return;
    this._interruption = error;
    // Settle first: a responder that ignores its signal must not hold the run open, and one that
    // reacts to it must find the run already over.
    this.fail(error);
    this._controller?.abort(this.abortReason());
  }
  /** Runs the conversation; settles exactly once. */
  execute(): Promise<ConversationResult<S, C>> {
    return new Promise<ConversationResult<S, C>>((resolve, reject) => {
      this._resolve = resolve;
      this._reject = reject;
      const resumption = this._resumption;
      if (resumption !== undefined) {
        this._durable = resumption.open(this);
        this.begin();
        return;
      }
      const opener = this._config.durable;
      if (opener === undefined) {
        this.begin();
        return;
      }
      // A new durable conversation: stored (its id reserved, its lease taken) before anything runs.
      // Its observers start first, so that what they save (the telemetry's trace context) is in
      // the first checkpoint: a crash before any other commit resumes it in the same trace.
      this.startObservations();
      const durable = opener.open(this);
      durable
        .create()
        .then(
          () => {
            this._durable = durable;
            this.begin();
          },
          (error: unknown) => {
            // Nothing was stored: the conversation failed at its start, and its observers hear it
            // (a taken id, which is no ConversationError, as a failure caused by it). run()
            // rejects with the error itself.
            this._settled = true;
            const reject = this._reject;
            try {
              this._observations.ended({
                ok: false,
                error:
                  error instanceof ConversationError
                    ? (error as ConversationError<S, C>)
                    : unexpectedFailure<S, C>(error, this),
              });
            } finally {
              this.letGo();
              reject(error as ConversationError<S, C>);
            }
          },
        )
        // Whatever escapes the handlers (a bug) settles the run rather than hanging it.
        .then(undefined, (error: unknown) => this.fail(error));
    });
  }
  /** Starts the observers (once: a new durable conversation's start before its creation). */
  protected startObservations(): void {
    if (this._observationsStarted) return;
    this._observationsStarted = true;
    const config = this._config;
    const now = performance.now();
    const restored = this._restored;
    // Elapsed counts active time only: a resumed conversation goes on from what was committed. A
    // new durable conversation's starts with its observers, before its creation.
    this._startedAt = restored === undefined ? now : now - restored.elapsedMs;
    // Without observers every run shares one empty set of them: nothing to start, nothing held.
    this._observations =
      config.observers.length === 0
        ? (NO_OBSERVATIONS as Observations<S, C>)
        : new Observations(
            config.observers,
            {
              orchestrator: config.name,
              conversationId: this._conversationId,
              input: this._input,
              responders: config.responderNames,
              providers: config.providers,
              startTimeMs: performance.timeOrigin + now,
              store: config.durable?.storeName,
            },
            this._resumption === undefined ? undefined : this.resumeInfo(this._resumption),
          );
    this._wrapsResponders = this._observations.wrapsResponders;
    this._watchesStarts = this._observations.watchesStarts;
    this._watchesDispatches = this._observations.watchDispatches;
  }
  protected begin(): void {
    const config = this._config;
    const restored = this._restored;
    const now = performance.now();
    this.startObservations();
    try {
      const cancelling = this._resumption?.cancel !== undefined;
      if (restored === undefined) {
        try {
          this._projection = config.projection.initial(this._input);
        } catch (error) {
          // cancel() runs nothing of the app's that can stop it: a projection that cannot start
          // leaves the aborted ending's projection undefined.
          if (!cancelling) throw new PolicyError('projection', this.snapshot(0), 0, error);
          this._projection = undefined as S;
        }
        this._history?.push(this._input);
      } else this.restore(restored);
      this._state = this.snapshot(this._dispatchCount);
      const cancel = this._resumption?.cancel;
      if (cancel !== undefined) {
        // Nothing runs: no policy starts, no responder; the ending is committed as aborted.
        this.fail(new ConversationAbortedError(this._state, this.elapsed(), cancel.reason));
        return;
      }
      if (this._resumption === undefined) {
        this._check = this.startPolicy('termination', () => config.termination.start());
      } else {
        const saved = restored?.termination;
        this._check = this.startPolicy('termination', () => config.termination.start(saved));
        if (
          restored !== undefined &&
          this._check.save === undefined &&
          !config.termination.stateless
        )
          warnUnsaved('termination', config.termination.name);
      }
      const turnPolicy = config.turnPolicy;
      if (typeof turnPolicy === 'function') this._turn = turnPolicy;
      else if (this._resumption === undefined) {
        this._turn = this.startPolicy('turn', () => turnPolicy.start(config.responders));
      } else {
        const saved = restored?.turn;
        this._turn = this.startPolicy('turn', () => turnPolicy.start(config.responders, saved));
        if (restored !== undefined && this._turn.save === undefined && !turnPolicy.stateless)
          warnUnsaved('turn', turnPolicy.name);
      }
      const drain = this._drain;
      if (drain !== undefined) {
        // Only a durable run can hand back; without a store a drain is an abort at a step's end.
        if (drain.aborted) throw this.drainedError();
        const unsubscribe = onAbort(drain, () => {
          this._draining = true;
          // The dispatch path's one check for anything unusual now sees it (see completeDispatch).
          this._slow = true;
          // Not in a call nor a commit (yielded between steps): hand back now, at this point.
          if (!this._waiting && !this._notifying && this._immediate !== undefined) {
            this._cutAfterDispatch = true;
            this.interrupt(this.drainedError());
          }
        });
        this._unsubscribeDrain = unsubscribe;
      }
      if (this._signal !== undefined) {
        if (this._signal.aborted) throw this.abortedError();
        this._unsubscribe = onAbort(this._signal, () => {
          if (this._notifying) this._abortedWhileNotifying = true;
          else this.interrupt(this.abortedError());
        });
      }
    } catch (error) {
      this.fail(error);
      return;
    }
    this._turnContext = new InvocationContext(this, -1);
    if (this._watchesDispatches) {
      this._info = {
        state: this._state,
        decision: CONTINUE,
        dispatchCount: 0,
        elapsedMs: 0,
        attempt: 1,
        responderIndex: 0,
        durationMs: 0,
        usage: undefined,
      };
    }
    this._lastTick = this._lastYield = now;
    if (restored === undefined) this._queue.push(this._input);
    const durable = this._durable;
    if (durable === undefined) {
      // Observers may enter a context (the conversation span's) once for the whole loop.
      this._observations.enter(() => this.pump());
      return;
    }
    durable.begin();
    if (this._resumption === undefined) this._observations.enter(() => this.pump());
    // A resumed segment commits first (running again, the person's answer, the attempt raised),
    // so a crash right after cannot lose them nor count the attempt twice.
    else this._observations.enter(() => void this.waitCommit(durable.commit()));
  }
  /** What a resumed segment's observers learn. */
  protected resumeInfo(resumption: Resumption<S, C>): {
    readonly resume: Omit<ConversationResume, 'saved'>;
    readonly saved: Readonly<Record<string, unknown>> | undefined;
  } {
    const restored = resumption.position;
    return {
      resume: {
        cause: resumption.cause,
        segment: resumption.segment,
        dispatchCount: restored?.dispatchCount ?? 0,
        elapsedMs: restored?.elapsedMs ?? 0,
        entries: resumption.entries,
      },
      saved: resumption.saved,
    };
  }
  /** Puts the loop back where the checkpoint left it; then the person's answer, queued first. */
  protected restore(restored: LoopPosition<S, C>): void {
    this._projection = restored.projection;
    this._lastMessage = restored.lastMessage;
    this._dispatchCount = restored.dispatchCount;
    if (restored.history !== undefined) for (const m of restored.history) this._history?.push(m);
    if (restored.usage !== undefined) {
      this._usage = UsageLedger.fromStored(restored.usage);
      this._usageTotals = this._usage.totals;
    }
    const answering = restored.answering;
    if (answering !== undefined && answering.next.length > 0) {
      this._message = answering.message;
      const names = this._config.responderNames;
      this._selection = answering.next.map((i) => names[i] as string);
      this._nextSelected = 0;
    }
    const input = this._resumption?.input;
    if (input !== undefined) {
      try {
        this._projection = this._config.projection.fold(this._projection, input);
      } catch (error) {
        throw new PolicyError('projection', this.snapshot(this._dispatchCount), 0, error);
      }
      this._lastMessage = input;
      this._history?.push(input);
      this._folded?.push(input);
      this._queue.push(input);
    }
    for (const message of restored.queue) this._queue.push(message);
  }
  protected startPolicy<T>(stage: 'turn' | 'termination', start: () => T): T {
    let started: T;
    try {
      started = start();
    } catch (error) {
      throw new PolicyError(stage, this._state, this.elapsed(), error);
    }
    if (typeof started !== 'function') {
      throw new PolicyError(
        stage,
        this._state,
        this.elapsed(),
        new TypeError(`Expected the ${stage} policy's start() to return a function`),
      );
    }
    return started;
  }
  /** After a dispatch, with a store or a suspension: commit as `durability` says, or suspend. */
  protected override afterDispatchSlow(decision: TerminationDecision): Step {
    const suspension = this._suspension;
    this._suspension = undefined;
    if (decision.terminate) {
      this.succeed(decision);
      return ENDED;
    }
    if (suspension !== undefined) {
      this.settle(decision, suspension);
      return ENDED;
    }
    if (this._abortedWhileNotifying || this._draining) {
      // Right after a dispatch, a point the store can hold: it is committed, then handed back.
      this._cutAfterDispatch = true;
      this.interrupt(this._abortedWhileNotifying ? this.abortedError() : this.drainedError());
      return ENDED;
    }
    const durable = this._durable as RunDurability<S, C>;
    const mode = (this._config.durable as DurabilityOpener<S, C>).mode;
    if (mode === 'sync') return this.waitCommit(durable.commit());
    // Group commit: one in flight; the dispatches completing meanwhile go with the next one.
    if (mode === 'async' && durable.idle) {
      durable
        .commit()
        .then(undefined, (error: unknown) => this.interrupt(error as ConversationError<S, C>));
    }
    return NEXT;
  }
  /** Waits for a commit before the next step (sync durability, a resumed segment's first commit). */
  protected waitCommit(commit: Promise<void>): Step {
    this._waiting = true;
    this._waitingFor = WAITING_FOR_COMMIT;
    commit.then(
      () => {
        if (this._settled || !this._waiting) return;
        this._waiting = false;
        if (this._draining) {
          // Drained while the dispatch was committed: handed back at that commit.
          this._cutAfterDispatch = true;
          this.interrupt(this.drainedError());
          return;
        }
        if (this._lastTick - this._lastYield >= this._config.yieldIntervalMs)
          this.yieldToEventLoop();
        else this.pump();
      },
      (error: unknown) => this.fail(error),
    );
    return WAIT;
  }
  protected override succeed(decision: TerminationDecision): void {
    this.settle(decision, undefined);
  }
  /** Ends the run with a result: ended, or suspended (committed first with a store). */
  protected settle(
    decision: TerminationDecision,
    suspension: ConversationSuspension | undefined,
  ): void {
    if (this._settled) return;
    this._settled = true;
    this.cleanup();
    const result: ConversationResult<S, C> = {
      conversationId: this._conversationId,
      // The last dispatch's snapshot, unless something moved since (the queue ran dry, a late report).
      state: this.endState(),
      decision,
      dispatchCount: this._dispatchCount,
      elapsedMs: this.elapsed(),
      usage: this.finalUsage(),
      ...(suspension === undefined ? {} : { suspended: suspension }),
    };
    const durable = this._durable;
    if (durable === undefined) {
      this.finish({ ok: true, result, ended: undefined });
      return;
    }
    // The question waits in the store with the conversation (a payload JSON cannot hold fails it).
    this._suspension = suspension;
    let settled: Promise<void>;
    try {
      settled = durable.settle(result, suspension);
    } catch (error) {
      this.finishFailed(error);
      return;
    }
    settled.then(
      () => this.finish({ ok: true, result, ended: suspension === undefined }),
      (error: unknown) => this.finishFailed(error),
    );
  }
  protected override fail(thrown: unknown): void {
    if (this._settled) return;
    this._settled = true;
    // Where the run was cut, read before cleanup() clears the yield: a point the store could hold
    // as it is (waiting for a responder's promise or a commit, yielded between steps, right after
    // a dispatch), or inside a step (a responder's synchronous call, a fold, a termination or turn
    // policy), where the state in memory is half of one step and is never committed.
    const cutAt: CutPoint =
      this._waiting && this._waitingFor >= 0
        ? 'call'
        : (this._waiting && this._waitingFor === WAITING_FOR_COMMIT) ||
            this._immediate !== undefined ||
            this._cutAfterDispatch
          ? 'between'
          : 'inside';
    this.cleanup();
    const error =
      thrown instanceof ConversationError
        ? (thrown as ConversationError<S, C>)
        : unexpectedFailure(thrown, this);
    if (this._usage !== undefined) settleUsage(error, this.finalUsage());
    const durable = this._durable;
    const handled = durable?.fail(error, cutAt, this._draining);
    if (handled === undefined) {
      // A durable run that failed before its creation landed stored nothing: no ending either.
      this.finish({
        ok: false,
        error,
        ended: this._config.durable === undefined ? undefined : false,
      });
      return;
    }
    handled.then(
      (ended) => this.finish({ ok: false, error, ended }),
      (failed: unknown) => this.finishFailed(failed),
    );
  }
  /** A durable ending's commit failed: the run rejects with that failure. */
  protected finishFailed(thrown: unknown): void {
    const error =
      thrown instanceof ConversationError
        ? (thrown as ConversationError<S, C>)
        : unexpectedFailure(thrown, this);
    if (this._usage !== undefined) settleUsage(error, this.finalUsage());
    const done = (): void => this.finish({ ok: false, error, ended: false });
    const released = (this._durable as RunDurability<S, C>).failedEnding(error);
    if (released === undefined) done();
    else released.then(done, done);
  }
  /** Tells the observers how it ended, lets go, settles the run's promise. */
  protected finish(end: ConversationEnd<S, C>): void {
    this._durable?.end();
    const resolve = this._resolve;
    const reject = this._reject;
    try {
      this._observations.ended(end);
    } finally {
      // Settles whatever the observers did: the run's promise never hangs.
      this.letGo();
      if (end.ok) resolve(end.result);
      else reject(end.error);
    }
  }
  /**
   * A settled run keeps no hold on what its observers made for it (the telemetry's span and its
   * events) nor on its promise (and through it, the result or the error, whose stack may hold
   * the observers). The run object itself may outlive the conversation for a while: measured with
   * V8, what a finished run still pointed to survived young-generation collections until the next
   * full one, which made a span of 100 events cost twice as much to write.
   */
  protected letGo(): void {
    this._observations = NO_OBSERVATIONS as Observations<S, C>;
    this._resolve = settledAlready;
    this._reject = settledAlready;
  }
  /** Leaves nothing behind: no timer, no immediate, no abort listener. */
  protected cleanup(): void {
    this.clearDeadline();
    this._durable?.stop();
    if (this._immediate !== undefined) {
      clearImmediate(this._immediate);
      this._immediate = undefined;
    }
    this._unsubscribe?.();
    this._unsubscribeDrain?.();
    this._unsubscribe = undefined;
  }
}
