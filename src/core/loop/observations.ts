/**
 * The observers of one conversation, as the loop calls them. Which hooks each observation has is
 * read once, at the start, so a conversation without per-dispatch hooks pays nothing for them. A
 * hook that throws, returns garbage, forgets to call what it wraps or calls it twice never breaks
 * the run: it is reported as a rate-limited process warning and the run goes on as if the hook
 * were not there.
 */

import { rateLimitedWarning } from '../shared/warnings.ts';
import { describeCause } from '../spi/errors.ts';
import type * as spi from '../spi/observer.ts';
import type { Message, Usage } from '../spi/types.ts';

// Rate-limited per process, not muted after the first: a hook that fails on every dispatch is
// reported once a minute with the count of failures held back.
const warnHookFailure = rateLimitedWarning('ConversationObserverWarning');

function hookFailed(hook: string, error: unknown): void {
  warnHookFailure(`An observer's ${hook} failed: ${describeCause(error)}`);
}

/** A hook as this file calls it: with the arguments its `ConversationObservation` method takes. */
// biome-ignore lint/suspicious/noExplicitAny: internal; each call passes what the hook's own type says
type Fn = (...args: any[]) => unknown;
type ObservationMethods = Record<keyof spi.ConversationObservation<never>, Fn>;

/**
 * One observation and which of its hooks exist, read once (a getter that throws drops the
 * observation). Hooks are then called as methods of `target`: a direct method call is what the
 * compiler inlines on the per-dispatch path (`fn.call(target, …)` costs ~150 instructions more).
 */
interface Hooks {
  readonly target: ObservationMethods;
  readonly runConversation: Fn | undefined;
  readonly runResponder: Fn | undefined;
  readonly onResponderStart: Fn | undefined;
  readonly onResponderEnd: Fn | undefined;
  readonly onResponderError: Fn | undefined;
  readonly onDispatch: Fn | undefined;
  readonly onUsage: Fn | undefined;
  readonly onListenerError: Fn | undefined;
  readonly onConversationEnd: Fn | undefined;
  readonly save: Fn | undefined;
  readonly onCheckpoint: Fn | undefined;
  readonly onCheckpointWrite: Fn | undefined;
  readonly onLeaseConflict: Fn | undefined;
  /** The observer's `key`, under which `save()`'s data is checkpointed. */
  readonly key: string | undefined;
}

function hook(
  observation: object,
  name: keyof spi.ConversationObservation<unknown>,
): Fn | undefined {
  const value = (observation as Record<string, unknown>)[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'function') throw new TypeError(`${name} is not a function`);
  return value as Fn;
}

function readHooks(observation: object, key: string | undefined): Hooks {
  return {
    target: observation as ObservationMethods,
    runConversation: hook(observation, 'runConversation'),
    runResponder: hook(observation, 'runResponder'),
    onResponderStart: hook(observation, 'onResponderStart'),
    onResponderEnd: hook(observation, 'onResponderEnd'),
    onResponderError: hook(observation, 'onResponderError'),
    onDispatch: hook(observation, 'onDispatch'),
    onUsage: hook(observation, 'onUsage'),
    onListenerError: hook(observation, 'onListenerError'),
    onConversationEnd: hook(observation, 'onConversationEnd'),
    save: hook(observation, 'save'),
    onCheckpoint: hook(observation, 'onCheckpoint'),
    onCheckpointWrite: hook(observation, 'onCheckpointWrite'),
    onLeaseConflict: hook(observation, 'onLeaseConflict'),
    key,
  };
}

/** An observer's `key`, when it is a usable one (read once; a throwing getter means none). */
function observerKey(observer: object): string | undefined {
  try {
    const key: unknown = (observer as { key?: unknown }).key;
    return typeof key === 'string' && key.length > 0 && key.length <= 64 ? key : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A listener failed after its run settled (a promise it returned rejected late): the run's
 * observations have ended, so each observer with `onLateListenerError` hears of it instead.
 */
export function lateListenerFailure<S, C>(
  observers: readonly spi.ConversationObserver<S, C>[],
  orchestrator: string,
  conversationId: string,
  error: unknown,
): void {
  for (const observer of observers) {
    try {
      if (typeof observer.onLateListenerError === 'function') {
        observer.onLateListenerError(error, orchestrator, conversationId);
      }
    } catch (hookError) {
      hookFailed('onLateListenerError', hookError);
    }
  }
}

export class Observations<S, C> {
  readonly #all: Hooks[] = [];
  readonly #runners: Hooks[];
  readonly #starters: Hooks[];
  readonly #dispatchers: Hooks[];
  /**
   * The one observation told of dispatches when there is exactly one and it has `onDispatch`
   * only (the telemetry): `dispatched` calls it without the loop and the per-hook checks, which
   * cost an observer ~24 ns a dispatch over a listener.
   */
  readonly #soleDispatch: ObservationMethods | undefined;

  constructor(
    observers: readonly spi.ConversationObserver<S, C>[],
    start: spi.ConversationStart<C>,
    /** On resume: what was committed, and the observers' saved data by key. */
    resumed?: {
      readonly resume: Omit<spi.ConversationResume, 'saved'>;
      readonly saved: Readonly<Record<string, unknown>> | undefined;
    },
  ) {
    for (const observer of observers) {
      try {
        const key = observerKey(observer);
        const observation: unknown = observer.startConversation(
          resumed === undefined
            ? start
            : {
                ...start,
                resumed: {
                  ...resumed.resume,
                  saved:
                    key === undefined || resumed.saved === undefined
                      ? undefined
                      : resumed.saved[key],
                },
              },
        );
        if (observation === undefined) continue;
        if (typeof observation !== 'object' || observation === null) {
          throw new TypeError(
            `expected an object of hooks or undefined, got ${observation === null ? 'null' : typeof observation}`,
          );
        }
        this.#all.push(readHooks(observation, key));
      } catch (error) {
        hookFailed('startConversation', error);
      }
    }
    this.#runners = this.#all.filter((o) => o.runResponder !== undefined);
    this.#starters = this.#all.filter((o) => o.onResponderStart !== undefined);
    this.#dispatchers = this.#all.filter(
      (o) => o.onDispatch !== undefined || o.onResponderEnd !== undefined,
    );
    this.wantsWrites = this.#all.some((o) => o.onCheckpointWrite !== undefined);
    const only = this.#dispatchers.length === 1 ? (this.#dispatchers[0] as Hooks) : undefined;
    this.#soleDispatch =
      only !== undefined && only.onResponderEnd === undefined ? only.target : undefined;
  }

  /**
   * Runs the conversation's loop inside every observer's `runConversation` (outermost first).
   * `run` runs exactly once: a wrapper that does not call it (or throws first) is reported and the
   * loop runs anyway; a second call is ignored.
   */
  enter(run: () => void): void {
    let call = run;
    for (let i = this.#all.length - 1; i >= 0; i--) {
      const hooks = this.#all[i] as Hooks;
      const wrap = hooks.runConversation;
      if (wrap === undefined) continue;
      const inner = call;
      call = () => {
        let ran = false;
        const once = () => {
          if (ran) return;
          ran = true;
          inner();
        };
        try {
          wrap.call(hooks.target, once);
        } catch (error) {
          hookFailed('runConversation', error);
        }
        if (!ran) {
          hookFailed('runConversation', new Error('it did not call run() synchronously'));
          once();
        }
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

  responderStarted(index: number, message: Message<C>, attempt: number): void {
    const starters = this.#starters;
    for (let i = 0; i < starters.length; i++) {
      const o = starters[i] as Hooks;
      try {
        o.target.onResponderStart(index, message, attempt);
      } catch (error) {
        hookFailed('onResponderStart', error);
      }
    }
  }

  /**
   * Calls the responder through every `runResponder` (each may run it in its own context). The
   * responder runs exactly once whatever the hooks do; only the responder's own failure travels
   * out as a failure, a hook's is reported and set aside.
   */
  invoke(index: number, invoke: () => unknown): unknown {
    let call = invoke;
    for (const runner of this.#runners) {
      const inner = call;
      call = () => {
        let called = false;
        let failed = false;
        let result: unknown;
        let failure: unknown;
        const once = () => {
          if (called) {
            if (failed) throw failure;
            return result;
          }
          called = true;
          try {
            result = inner();
            return result;
          } catch (error) {
            failed = true;
            failure = error;
            throw error;
          }
        };
        let returned: unknown;
        try {
          returned = runner.target.runResponder(index, once);
        } catch (error) {
          if (failed && error === failure) throw error;
          hookFailed('runResponder', error);
          if (failed) throw failure;
          return called ? result : once();
        }
        if (!called) {
          hookFailed('runResponder', new Error('it did not call invoke()'));
          return once();
        }
        if (failed) throw failure;
        return returned;
      };
    }
    return call();
  }

  dispatched(info: spi.DispatchInfo<S, C>): void {
    const sole = this.#soleDispatch;
    if (sole !== undefined) {
      try {
        sole.onDispatch(info);
      } catch (error) {
        hookFailed('onDispatch', error);
      }
      return;
    }
    const dispatchers = this.#dispatchers;
    for (let i = 0; i < dispatchers.length; i++) {
      const o = dispatchers[i] as Hooks;
      try {
        if (o.onResponderEnd !== undefined)
          o.target.onResponderEnd(info.responderIndex, info.durationMs);
        if (o.onDispatch !== undefined) o.target.onDispatch(info);
      } catch (error) {
        hookFailed('onDispatch', error);
      }
    }
  }

  responderFailed(index: number, durationMs: number, error: unknown): void {
    const failure: spi.ResponderFailure = { error };
    for (const o of this.#all) {
      try {
        if (o.onResponderEnd !== undefined)
          o.onResponderEnd.call(o.target, index, durationMs, failure);
        if (o.onResponderError !== undefined)
          o.onResponderError.call(o.target, index, durationMs, error);
      } catch (hookError) {
        hookFailed('onResponderError', hookError);
      }
    }
  }

  usageReported(index: number, usage: Usage, dispatchNumber: number): void {
    for (const o of this.#all) {
      if (o.onUsage === undefined) continue;
      try {
        o.onUsage.call(o.target, index, usage, dispatchNumber);
      } catch (error) {
        hookFailed('onUsage', error);
      }
    }
  }

  listenerFailed(error: unknown): void {
    this.#tell('onListenerError', error);
  }

  /** Calls hook `name` of every observation that has it (not on the per-dispatch path). */
  #tell(name: 'onListenerError' | 'onConversationEnd', arg: unknown): void {
    for (const o of this.#all) {
      const fn = o[name];
      if (fn === undefined) continue;
      try {
        fn.call(o.target, arg);
      } catch (error) {
        hookFailed(name, error);
      }
    }
  }

  /** Each keyed observation's `save()` data, for a checkpoint; undefined when none saves. */
  save(): Record<string, unknown> | undefined {
    let saved: Record<string, unknown> | undefined;
    for (const o of this.#all) {
      if (o.save === undefined || o.key === undefined) continue;
      try {
        const data = o.save.call(o.target);
        if (data !== undefined) {
          saved ??= {};
          saved[o.key] = data;
        }
      } catch (error) {
        hookFailed('save', error);
      }
    }
    return saved;
  }

  checkpointed(durationMs: number, error: unknown, failed: boolean): void {
    for (const o of this.#all) {
      if (o.onCheckpoint === undefined) continue;
      try {
        if (failed) o.target.onCheckpoint(durationMs, error);
        else o.target.onCheckpoint(durationMs);
      } catch (hookError) {
        hookFailed('onCheckpoint', hookError);
      }
    }
  }

  /** Whether an observation has `onCheckpointWrite` (else a commit makes no write record). */
  readonly wantsWrites: boolean;

  written(write: spi.CheckpointWrite): void {
    for (const o of this.#all) {
      if (o.onCheckpointWrite === undefined) continue;
      try {
        o.target.onCheckpointWrite(write);
      } catch (hookError) {
        hookFailed('onCheckpointWrite', hookError);
      }
    }
  }

  leaseConflict(): void {
    for (const o of this.#all) {
      if (o.onLeaseConflict === undefined) continue;
      try {
        o.target.onLeaseConflict();
      } catch (error) {
        hookFailed('onLeaseConflict', error);
      }
    }
  }

  ended(end: spi.ConversationEnd<S, C>): void {
    this.#tell('onConversationEnd', end);
  }
}
