import {
  anyOf,
  ConversationOrchestrator,
  converged,
  type Message,
  maxDispatches,
  type OrchestratorOptions,
  type Responder,
  roundRobin,
} from '../../src/index.ts';

export interface Desks {
  readonly quotes: Readonly<Record<string, number>>;
}

export function spread(state: Desks): number {
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (const q of Object.values(state.quotes)) {
    if (q < min) min = q;
    if (q > max) max = q;
  }
  return max - min;
}

/** Desks that move halfway toward the mean of their peers' quotes: deterministic convergence. */
export function desk(name: string): Responder<Desks, number> {
  return {
    name,
    respond(_message, state) {
      const quotes = state.projection.quotes;
      let sum = 0;
      let n = 0;
      for (const [k, v] of Object.entries(quotes)) {
        if (k !== name) {
          sum += v;
          n++;
        }
      }
      const mine = quotes[name] ?? 0;
      return { sender: name, content: mine + (sum / n - mine) / 2 };
    },
  };
}

export const deskProjection = {
  initial: (): Desks => ({ quotes: { a: 100, b: 110, c: 90 } }),
  fold: (s: Desks, m: Message<number>): Desks => ({
    quotes: { ...s.quotes, [m.sender]: m.content },
  }),
};

export function desksOrchestrator(
  extra: Partial<OrchestratorOptions<Desks, number>> = {},
): ConversationOrchestrator<Desks, number> {
  return new ConversationOrchestrator<Desks, number>({
    name: 'desks',
    responders: ['a', 'b', 'c'].map(desk),
    turnPolicy: roundRobin(),
    projection: deskProjection,
    termination: anyOf(
      converged({ measure: (s) => spread(s.projection), tolerance: 0.01, consecutive: 3 }),
      maxDispatches(1000),
    ),
    ...extra,
  });
}

/** A counter conversation: each responder answers with content + 1; the projection sums. */
export function counterOrchestrator(
  extra: Partial<OrchestratorOptions<number, number>> = {},
  names: readonly string[] = ['a', 'b', 'c'],
): ConversationOrchestrator<number, number> {
  return new ConversationOrchestrator<number, number>({
    name: 'counter',
    responders: names.map((name) => ({
      name,
      respond: (m: Message<number>) => ({ sender: name, content: m.content + 1 }),
    })),
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (s, m) => s + m.content },
    termination: maxDispatches(10),
    ...extra,
  });
}
