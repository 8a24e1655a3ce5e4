/**
 * What the loop hands an observer of dispatch `n` that continued: `n * 10` ms into the
 * conversation, by responder `n % 3`, taking `durationMs`.
 */
import { CONTINUE } from '../../src/index.ts';

export const continuedDispatch = (n: number, durationMs: number) => ({
  state: {} as never,
  decision: CONTINUE,
  dispatchCount: n,
  elapsedMs: n * 10,
  responderIndex: n % 3,
  durationMs,
});
