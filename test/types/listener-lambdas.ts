/**
 * Type-level test, checked by `npm run typecheck` (tsc over `test/`): any lambda is a listener,
 * whatever it returns, and the parameters keep their types.
 */
import { EventEmitter } from 'node:events';
import {
  type ConversationListener,
  ConversationOrchestrator,
  composeListeners,
  maxDispatches,
  type TerminationDecision,
} from '../../src/index.ts';

const emitter = new EventEmitter();
const counts: number[] = [];

// The seed's one-line lambdas: they return a boolean and a number.
export const emits: ConversationListener<number> = (_s, _d, n) => emitter.emit('dispatch', n);
export const pushes: ConversationListener<number> = (_s, _d, n) => counts.push(n);
export const returnsPromise: ConversationListener<number> = async (s) => s.projection * 2;
export const returnsNothing: ConversationListener<number> = () => {};
export const typedParameters: ConversationListener<{ spread: number }> = (
  state,
  decision: TerminationDecision,
  dispatchCount: number,
  elapsedMs: number,
) => state.projection.spread + dispatchCount + elapsedMs + (decision.terminate ? 1 : 0);

export const orchestrator = new ConversationOrchestrator<number, number>({
  name: 'typed',
  responders: [{ name: 'a', respond: (m) => ({ sender: 'a', content: m.content + 1 }) }],
  turnPolicy: (_m, _s, rs) => rs,
  projection: { initial: () => 0, fold: (_s, m) => m.content },
  termination: maxDispatches(3),
  listener: composeListeners<number, number>(
    (s, d, n, ms) => emitter.emit('dispatch', n, s.projection, d.reason, ms),
    (_s, _d, n) => counts.push(n),
  ),
});

// The parameters are typed, not `any`: misuse is still an error.
// @ts-expect-error the projection is a number, not a string
export const wrongProjection: ConversationListener<number> = (s) => s.projection.toUpperCase();
// @ts-expect-error a listener takes at most four parameters
export const tooMany: ConversationListener<number> = (_s, _d, _n, _ms, _extra: string) => 0;
