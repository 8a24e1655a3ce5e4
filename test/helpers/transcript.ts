/**
 * The transcript conversation of the incremental-checkpoint tests, the crash child and the
 * transcript bench: two responders `a` and `b` in turn, each message a line that the projection
 * appends in place to the list of every line so far (the input's content first).
 */
import type {
  ConversationState,
  Message,
  Projection,
  Responder,
  ResponderContext,
} from '../../src/index.ts';

export interface Transcript {
  readonly lines: string[];
}

/** The projection: the input's content, then every answer's appended (in place: cheap). */
export function transcriptProjection(): Projection<Transcript, string> {
  return {
    initial: (input) => ({ lines: [input.content] }),
    fold: (s, m) => {
      s.lines.push(m.content);
      return s;
    },
  };
}

/**
 * The responders `a` and `b`, each answering the line `content` gives: at once when it returns a
 * string, as a promise when it returns one.
 */
export function transcriptResponders(
  content: (
    name: string,
    message: Message<string>,
    state: ConversationState<Transcript, string>,
    context: ResponderContext,
  ) => string | Promise<string>,
): Responder<Transcript, string>[] {
  return ['a', 'b'].map((name) => ({
    name,
    respond: (message: Message<string>, state, context) => {
      const line = content(name, message, state, context);
      return typeof line === 'string'
        ? { sender: name, content: line }
        : line.then((c) => ({ sender: name, content: c }));
    },
  }));
}
