/**
 * The one bound on a call that may never answer (a store, Redis, a database behind a dead
 * network): the store calls of the core and of every store, and the fleet's Redis calls use it.
 */

/**
 * `call()`'s result, or a rejection with `timeoutError()` when it has not settled within `ms`. A
 * synchronous throw becomes a rejection. The timer is referenced, so a caller awaiting the result
 * sees it settle even when nothing else keeps the process alive, and it is cleared as soon as the
 * call settles.
 */
export function bounded<T>(
  call: () => T | PromiseLike<T>,
  ms: number,
  timeoutError: () => unknown,
): Promise<T> {
  let promise: Promise<T>;
  try {
    promise = Promise.resolve(call());
  } catch (error) {
    return Promise.reject(error);
  }
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(timeoutError()), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
