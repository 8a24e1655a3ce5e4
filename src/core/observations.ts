/**
 * The observers of one conversation, as the loop calls them. Which hooks each observation has is
 * read once, at the start, so a conversation without per-dispatch hooks pays nothing for them; a
 * hook that throws never breaks the run (it is reported as a rate-limited process warning).
 */
import { describeCause } from './errors.ts';
import type {
  ConversationEnd,
  ConversationObservation,
  ConversationObserver,
  ConversationStart,
  DispatchInfo,
} from './observer.ts';
import type { Message } from './types.ts';
import { rateLimitedWarning } from './warnings.ts';

// Rate-limited per process, not muted after the first: a hook that fails on every dispatch is
// reported once a minute with the count of failures held back.
const warnHookFailure = rateLimitedWarning('ConversationObserverWarning');

function hookFailed(error: unknown): void {
  warnHookFailure(`An observer hook failed: ${describeCause(error)}`);
}

export class Observations<S, C> {
  readonly #all: ConversationObservation<S, C>[] = [];
  readonly #runners: ConversationObservation<S, C>[];
  readonly #starters: ConversationObservation<S, C>[];
  readonly #dispatchers: ConversationObservation<S, C>[];

  constructor(observers: readonly ConversationObserver<S, C>[], start: ConversationStart<C>) {
    for (const observer of observers) {
      try {
        const observation = observer.startConversation(start);
        if (observation !== undefined) this.#all.push(observation);
      } catch (error) {
        process.emitWarning(
          `An observer failed to start: ${describeCause(error)}`,
          'ConversationObserverWarning',
        );
      }
    }
    this.#runners = this.#all.filter((o) => o.runResponder !== undefined);
    this.#starters = this.#all.filter((o) => o.onResponderStart !== undefined);
    this.#dispatchers = this.#all.filter(
      (o) => o.onDispatch !== undefined || o.onResponderEnd !== undefined,
    );
  }

  /** Runs the conversation's loop inside every observer's `runConversation` (outermost first). */
  enter(run: () => void): void {
    let call = run;
    for (let i = this.#all.length - 1; i >= 0; i--) {
      const wrap = this.#all[i]?.runConversation;
      if (wrap === undefined) continue;
      const inner = call;
      call = () => {
        let ran = false;
        try {
          wrap(() => {
            ran = true;
            inner();
          });
        } catch (error) {
          hookFailed(error);
        }
        // A wrapper that forgot to call `run` must not stall the conversation.
        if (!ran) inner();
      };
    }
    call();
  }

  /** Whether any observer wraps responder calls (`invoke` is then needed). */
  get wrapsResponders(): boolean {
    return this.#runners.length > 0;
  }

  /** Whether `responderStarted` has anyone to tell. */
  get watchesStarts(): boolean {
    return this.#starters.length > 0;
  }

  /** Whether `dispatched` has anyone to tell: the loop fills the DispatchInfo only then. */
  get watchDispatches(): boolean {
    return this.#dispatchers.length > 0;
  }

  responderStarted(index: number, message: Message<C>): void {
    const starters = this.#starters;
    for (let i = 0; i < starters.length; i++) {
      try {
        starters[i]?.onResponderStart?.(index, message);
      } catch (error) {
        hookFailed(error);
      }
    }
  }

  /** Calls the responder through every `runResponder` (each may run it in its own context). */
  invoke(index: number, invoke: () => unknown): unknown {
    if (this.#runners.length === 0) return invoke();
    let call = invoke;
    for (const runner of this.#runners) {
      const inner = call;
      const run = runner.runResponder as NonNullable<typeof runner.runResponder>;
      call = () => run(index, inner);
    }
    return call();
  }

  dispatched(info: DispatchInfo<S, C>): void {
    const dispatchers = this.#dispatchers;
    for (let i = 0; i < dispatchers.length; i++) {
      const o = dispatchers[i] as ConversationObservation<S, C>;
      try {
        o.onResponderEnd?.(info.responderIndex, info.durationMs);
        o.onDispatch?.(info);
      } catch (error) {
        hookFailed(error);
      }
    }
  }

  responderFailed(index: number, durationMs: number, error: unknown): void {
    const failure = { error };
    for (const o of this.#all) {
      try {
        o.onResponderEnd?.(index, durationMs, failure);
        o.onResponderError?.(index, durationMs, error);
      } catch (hookError) {
        hookFailed(hookError);
      }
    }
  }

  listenerFailed(error: unknown): void {
    for (const o of this.#all) {
      try {
        o.onListenerError?.(error);
      } catch (hookError) {
        hookFailed(hookError);
      }
    }
  }

  ended(end: ConversationEnd<S, C>): void {
    for (const o of this.#all) {
      try {
        o.onConversationEnd?.(end);
      } catch (error) {
        process.emitWarning(
          `An observer failed at conversation end: ${describeCause(error)}`,
          'ConversationObserverWarning',
        );
      }
    }
  }
}
