/**
 * The counting conversation of the segment tests: `a` then `b` in turn (round robin) each answer
 * the number they get plus one, the state is the last number, `steps` (8) dispatches; `b`
 * suspends (`{ question: 'go on?' }`) when `suspends` says so: by default once, on message 3.
 */
import {
  type ConversationState,
  type Message,
  maxDispatches,
  type OrchestratorOptions,
  type ResponderContext,
  roundRobin,
  suspend,
} from '../../src/index.ts';

export interface CounterOptions
  extends Omit<
    OrchestratorOptions<number, number>,
    'name' | 'responders' | 'turnPolicy' | 'projection' | 'termination'
  > {
  /** How `a` answers, and `b` when it does not suspend (as `step`, the number plus one). */
  readonly step: (
    responder: 'a' | 'b',
    message: Message<number>,
    state: ConversationState<number, number>,
    context: ResponderContext,
  ) => Message<number> | Promise<Message<number>>;
  /** Whether `b` suspends on `message`; by default once, on message 3. */
  readonly suspends?: (message: Message<number>) => boolean;
  /** Dispatches in all (8). */
  readonly steps?: number;
}

/** The next number, from `step`. */
export const plusOne = (m: Message<number>): Message<number> => ({
  sender: 'step',
  content: m.content + 1,
});

/** The options of the counting conversation named `name`. */
export function counter(
  name: string,
  { step, suspends, steps, ...rest }: CounterOptions,
): OrchestratorOptions<number, number> {
  let asked = false;
  const once = (m: Message<number>) => {
    if (m.content !== 3 || asked) return false;
    asked = true;
    return true;
  };
  const suspending = suspends ?? once;
  return {
    ...rest,
    name,
    responders: [
      { name: 'a', respond: (m, state, context) => step('a', m, state, context) },
      {
        name: 'b',
        respond: (m, state, context) =>
          suspending(m) ? suspend({ question: 'go on?' }) : step('b', m, state, context),
      },
    ],
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (_n, m) => m.content },
    termination: maxDispatches(steps ?? 8),
  };
}
