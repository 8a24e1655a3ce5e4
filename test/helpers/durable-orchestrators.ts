/**
 * The small durable conversations the durable tests build: one responder `a` counting its
 * answers, and two responders `a` and `b` sharing one `respond`, summing what they answer.
 */
import {
  ConversationOrchestrator,
  type ConversationStore,
  type Durability,
  maxDispatches,
  type OrchestratorOptions,
  type Responder,
  roundRobin,
} from '../../src/index.ts';

export type OneResponderOptions<S> = Omit<
  Partial<OrchestratorOptions<S, unknown>>,
  'name' | 'store' | 'responders' | 'turnPolicy' | 'projection' | 'termination'
> & {
  readonly name: string;
  readonly store: ConversationStore;
  /** Dispatches in all (3). */
  readonly steps?: number;
  /** The state (by default the count of answers, from 0). */
  readonly projection?: { initial: () => S; fold: (s: S, m: { content: unknown }) => S };
};

/** One responder `a` answering with `respond`, `steps` (3) dispatches, more options on top. */
export function oneResponder<S = number>(
  respond: Responder<S, unknown>['respond'],
  { name, store, steps, projection, ...rest }: OneResponderOptions<S>,
): ConversationOrchestrator<S, unknown> {
  return new ConversationOrchestrator<S, unknown>({
    ...rest,
    name,
    store,
    responders: [{ name: 'a', respond }],
    turnPolicy: roundRobin(),
    projection: (projection ?? {
      initial: () => 0,
      fold: (n: number) => n + 1,
    }) as { initial: () => S; fold: (s: S) => S },
    termination: maxDispatches(steps ?? 3),
  });
}

/**
 * The builder of a file's two-responder conversations named `name`: `a` and `b` in turn, both
 * answering with `respond`; the state the sum of their answers, `dispatches` dispatches on
 * `store` with `durability`; `extra` options on top.
 */
export function pairOrchestrators(name: string, dispatches: number) {
  return (
    store: ConversationStore,
    durability: Durability,
    respond: Responder<number, number>['respond'],
    extra: Partial<OrchestratorOptions<number, number>> = {},
  ): ConversationOrchestrator<number, number> =>
    new ConversationOrchestrator<number, number>({
      name,
      store,
      durability,
      responders: [
        { name: 'a', respond },
        { name: 'b', respond },
      ],
      turnPolicy: roundRobin(),
      projection: { initial: () => 0, fold: (total, m) => total + m.content },
      termination: maxDispatches(dispatches),
      ...extra,
    });
}
