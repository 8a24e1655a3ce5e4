/** Helpers for the single-function ConversationListener SPI. */
import type { ConversationListener } from '../spi/types.ts';

/** One failure as itself, several as an AggregateError. */
function failure(errors: readonly unknown[]): unknown {
  return errors.length === 1 ? errors[0] : new AggregateError(errors, 'Listeners failed');
}

/**
 * One listener that calls each of `listeners` in order. A listener that throws does not stop the
 * others, and no failure waits for another listener:
 * - the synchronous throws of a call are reported at once, through the orchestrator's
 *   `reportError` (one as itself, several as an AggregateError), even while a promise another
 *   listener returned is still pending (or never settles);
 * - the promises returned are settled together, and their rejections are the rejection of the
 *   promise the composed listener returns (one as itself, several as an AggregateError).
 * So `onListenerError` hears of every failure. Called by hand without `reportError`, the
 * synchronous throws are thrown after all ran when no promise came back, else they join the
 * rejections.
 */
export function composeListeners<S, C = unknown>(
  ...listeners: readonly ConversationListener<S, C>[]
): ConversationListener<S, C> {
  listeners.forEach((listener, i) => {
    if (typeof listener !== 'function') {
      throw new TypeError(`Expected listener ${i} to be a function, got ${typeof listener}`);
    }
  });
  return (state, decision, dispatchCount, elapsedMs, reportError) => {
    const errors: unknown[] = [];
    const pending: PromiseLike<unknown>[] = [];
    for (const listener of listeners) {
      try {
        const returned = listener(state, decision, dispatchCount, elapsedMs, reportError);
        if (
          typeof returned === 'object' &&
          returned !== null &&
          typeof (returned as PromiseLike<unknown>).then === 'function'
        )
          pending.push(returned as PromiseLike<unknown>);
      } catch (error) {
        errors.push(error);
      }
    }
    if (pending.length === 0) {
      if (errors.length > 0) throw failure(errors);
      return;
    }
    // Reported now: a pending promise (one that never settles) must not hold them back.
    if (errors.length > 0 && typeof reportError === 'function')
      reportError(failure(errors.splice(0)));
    return Promise.allSettled(pending).then((settled) => {
      for (const s of settled) if (s.status === 'rejected') errors.push(s.reason);
      if (errors.length > 0) throw failure(errors);
    });
  };
}
