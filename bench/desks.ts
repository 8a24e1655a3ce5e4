/**
 * The benchmarks' three desks: london, new_york and tokyo quote in turn, each moving its quote 1%
 * toward the mean of the others' (sync or async responders), the quotes kept in one Float64Array
 * updated in place; a conversation ends once the spread is under 1e-9, or after `length`.
 */
import {
  anyOf,
  type ConversationListener,
  type ConversationObserver,
  ConversationOrchestrator,
  converged,
  type Message,
  maxDispatches,
  type Responder,
  roundRobin,
  type TerminationPolicy,
} from '../src/index.ts';

/** The dispatches of a long conversation. */
export const LONG = 10_000;

export interface Desks {
  readonly quotes: Float64Array;
}

export function desks(async: boolean): Responder<Desks, number>[] {
  return ['london', 'new_york', 'tokyo'].map((name, i) => {
    const answer = (state: { projection: Desks }): Message<number> => {
      const q = state.projection.quotes;
      const mine = q[i] as number;
      const mean = ((q[0] as number) + (q[1] as number) + (q[2] as number) - mine) / 2;
      return { sender: name, content: mine + (mean - mine) * 0.01 };
    };
    return async
      ? { name, respond: async (_m, state) => answer(state) }
      : { name, respond: (_m, state) => answer(state) };
  });
}

export const INDEX: Record<string, number> = { london: 0, new_york: 1, tokyo: 2 };
export const spreadOf = (q: Float64Array) =>
  Math.max(q[0] as number, q[1] as number, q[2] as number) -
  Math.min(q[0] as number, q[1] as number, q[2] as number);

export function orchestrator(
  opts: {
    async?: boolean;
    /** Instead of `desks(async)`. */
    responders?: Responder<Desks, number>[];
    listener?: ConversationListener<Desks, number>;
    observers?: ConversationObserver<Desks, number>[];
    length?: number;
    /** Instead of converging or `length` dispatches. */
    termination?: TerminationPolicy<Desks, number>;
  } = {},
): ConversationOrchestrator<Desks, number> {
  return new ConversationOrchestrator<Desks, number>({
    name: 'desks',
    responders: opts.responders ?? desks(opts.async ?? false),
    turnPolicy: roundRobin(),
    projection: {
      initial: () => ({ quotes: Float64Array.of(100, 110, 90) }),
      // The projection is this conversation's own: updating it in place is allowed and cheap.
      fold: (s, m) => {
        s.quotes[INDEX[m.sender] as number] = m.content;
        return s;
      },
    },
    termination:
      opts.termination ??
      anyOf(
        converged({ measure: (s) => spreadOf(s.projection.quotes), tolerance: 1e-9 }),
        maxDispatches(opts.length ?? LONG),
      ),
    ...(opts.listener ? { listener: opts.listener } : {}),
    ...(opts.observers ? { observers: opts.observers } : {}),
  });
}
