/**
 * A call whose settling is told: a responder span (observed-conversation.ts) ends when the
 * responder's answer settles, at once for a value or a throw, later for a promise.
 */
import { type Context, context } from '@opentelemetry/api';

/** How a call failed (absent: it answered). */
export interface CallFailure {
  readonly error: unknown;
}

/**
 * Calls `invoke` in `active` and tells `settled` once its answer settles: at once when it throws
 * or returns a value, when the promise settles when it returns a thenable. Returns what `invoke`
 * returned (a native promise for a thenable); its failures are thrown or rejected as they came.
 */
export function callSettled<T>(
  active: Context,
  invoke: () => T,
  settled: (failure?: CallFailure) => void,
): T {
  let result: T;
  try {
    result = context.with(active, invoke);
  } catch (error) {
    settled({ error });
    throw error;
  }
  let thenable: boolean;
  try {
    thenable =
      result !== null &&
      (typeof result === 'object' || typeof result === 'function') &&
      typeof (result as { then?: unknown }).then === 'function';
  } catch (error) {
    // A `then` getter that throws: the responder's answer failed, and so did its span.
    settled({ error });
    throw error;
  }
  if (!thenable) {
    settled();
    return result;
  }
  // A late answer (after an abort or a deadline ended the conversation and this span) finds
  // the span ended and leaves it alone. A foreign thenable is adopted by a native promise: its
  // own `then` may return nothing (the answer would be lost) or call back twice.
  return Promise.resolve(result as unknown as PromiseLike<unknown>).then(
    (value) => {
      settled();
      return value;
    },
    (error: unknown) => {
      settled({ error });
      throw error;
    },
  ) as T;
}
