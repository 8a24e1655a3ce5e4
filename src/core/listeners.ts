/** Helpers for the single-function ConversationListener SPI. */
import type { ConversationListener } from './types.ts';

/**
 * One listener that calls each of `listeners` in order. A listener that throws does not stop the
 * others; the failures are rethrown after all ran (one as itself, several as an AggregateError),
 * and promises returned are settled together, so the orchestrator reports every failure.
 */
export function composeListeners<S, C = unknown>(
  ...listeners: readonly ConversationListener<S, C>[]
): ConversationListener<S, C> {
  listeners.forEach((listener, i) => {
    if (typeof listener !== 'function') {
      throw new TypeError(`Expected listener ${i} to be a function, got ${typeof listener}`);
    }
  });
  return (state, decision, dispatchCount, elapsedMs) => {
    const errors: unknown[] = [];
    const pending: PromiseLike<unknown>[] = [];
    for (const listener of listeners) {
      try {
        const returned = listener(state, decision, dispatchCount, elapsedMs);
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
      if (errors.length > 0)
        throw errors.length === 1 ? errors[0] : new AggregateError(errors, 'Listeners failed');
      return;
    }
    return Promise.allSettled(pending).then((settled) => {
      for (const s of settled) if (s.status === 'rejected') errors.push(s.reason);
      if (errors.length > 0)
        throw errors.length === 1 ? errors[0] : new AggregateError(errors, 'Listeners failed');
    });
  };
}
