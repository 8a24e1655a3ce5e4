/**
 * The small conversation of numbers most telemetry tests run: its responders in round robin,
 * its projection counting the dispatches, the rest (termination, observers, listener) theirs.
 */
import {
  ConversationOrchestrator,
  type ConversationStart,
  type Message,
  type OrchestratorOptions,
  type Responder,
  roundRobin,
} from '../../src/index.ts';

/** Responder `name`, answering the number it gets plus one. */
export function plusOneResponder(name: string): Responder<number, number> {
  return { name, respond: (m: Message<number>) => ({ sender: name, content: m.content + 1 }) };
}

export type NumberConversationOptions = Omit<
  OrchestratorOptions<number, number>,
  'name' | 'responders' | 'turnPolicy' | 'projection'
> & {
  /** Its responders; a name stands for `plusOneResponder(name)`. */
  readonly responders: readonly (string | Responder<number, number>)[];
  /** The fold of the messages; by default it counts the dispatches. */
  readonly projection?: OrchestratorOptions<number, number>['projection'];
};

/** A conversation of numbers named `name`, its `responders` answering in round robin. */
export function numberConversation(
  name: string,
  { responders, ...rest }: NumberConversationOptions,
): ConversationOrchestrator<number, number> {
  return new ConversationOrchestrator<number, number>({
    name,
    responders: responders.map((r) => (typeof r === 'string' ? plusOneResponder(r) : r)),
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (s) => s + 1 },
    ...rest,
  });
}

/**
 * What the core hands an observer at the start of conversation `c` of `orchestrator` from
 * message 0, its one responder `responder`: for an observer driven by hand.
 */
export function startOf(orchestrator: string, responder = 'a'): ConversationStart<number> {
  return {
    orchestrator,
    conversationId: 'c',
    input: { sender: 'user', content: 0 },
    responders: [responder],
    startTimeMs: Date.now(),
  };
}
