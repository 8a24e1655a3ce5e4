/**
 * A store call bounded in time: a database behind a dead network may never answer, and a call
 * that never settles would hold its conversation forever.
 */
import { bounded } from '../../core/shared/bounded.ts';

/**
 * `work()`, its failure given to `fail` (which names the store and the call), and past `boundMs`
 * a rejection with `fail(new Error('no answer within … ms'))`. `boundMs` undefined: the client
 * bounds every command itself, no timer is set.
 */
export function timedCall<T>(
  work: () => Promise<T>,
  boundMs: number | undefined,
  fail: (cause: unknown) => Error,
): Promise<T> {
  const call = async (): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      throw fail(error);
    }
  };
  if (boundMs === undefined) return call();
  return bounded(call, boundMs, () => fail(new Error(`no answer within ${boundMs} ms`)));
}
