/**
 * Turn policies: which responders answer the message at the head of the queue.
 * A policy's `start()` is called once per conversation, so rotation state never leaks between
 * conversations. A plain function is accepted too: it is a stateless policy.
 */
import type { TurnFunction, TurnPolicy, TurnSelection } from '../core/policy.ts';
import type { Responder } from '../core/types.ts';

/**
 * Each message is answered by the next responder in construction order, cycling.
 * @example roundRobin() // a, b, c, a, b, c ...
 */
export function roundRobin<S, C = unknown>(): TurnPolicy<S, C> {
  // The one-responder selections, made once per responders array (an orchestrator passes the
  // same one to every run), not once per conversation.
  let madeFor: readonly Responder<S, C>[] | undefined;
  let selections: readonly TurnSelection<S, C>[] = [];
  return {
    name: 'round_robin',
    start(responders, saved) {
      if (responders !== madeFor) {
        selections = responders.map((r) => [r] as const);
        madeFor = responders;
      }
      const single = selections;
      // Resumed: the position saved at the last commit.
      let next =
        typeof saved === 'number' && Number.isInteger(saved) && saved >= 0 && saved < single.length
          ? saved
          : 0;
      const select: TurnFunction<S, C> = () => {
        const selection = single[next] as TurnSelection<S, C>;
        next = next + 1 === single.length ? 0 : next + 1;
        return selection;
      };
      select.save = () => next;
      return select;
    },
  };
}

/** Every responder except the message's sender answers, in construction order. */
export function broadcast<S, C = unknown>(): TurnPolicy<S, C> {
  return {
    name: 'broadcast',
    // Its map is a cache of selections, not state: nothing to save.
    stateless: true,
    start(responders) {
      const bySender = new Map<string, readonly Responder<S, C>[]>();
      return (message) => {
        let selection = bySender.get(message.sender);
        if (selection === undefined) {
          selection = responders.filter((r) => r.name !== message.sender);
          bySender.set(message.sender, selection);
        }
        return selection;
      };
    },
  };
}

/** Options of `addressed()`. */
export interface AddressedOptions {
  /**
   * Also read `@name` mentions from string content when a message has no `recipients`.
   * @default true
   */
  readonly mentions?: boolean;
}

/**
 * The message names who answers: its `recipients`, else `@name` mentions in string content.
 * A message that names nobody is answered by nobody. Unknown names fail the run clearly.
 */
export function addressed<S, C = unknown>(options: AddressedOptions = {}): TurnPolicy<S, C> {
  const mentions = options.mentions ?? true;
  const NONE: TurnSelection<S, C> = [];
  return {
    name: 'addressed',
    stateless: true,
    start(responders) {
      const names = responders.map((r) => r.name);
      return (message) => {
        if (message.recipients !== undefined) return message.recipients;
        if (!mentions || typeof message.content !== 'string') return NONE;
        const content = message.content;
        return names.filter((name) => mentionIndex(content, name) >= 0);
      };
    },
  };
}

function mentionIndex(content: string, name: string): number {
  let at = content.indexOf(`@${name}`);
  while (at >= 0) {
    const after = content.charCodeAt(at + name.length + 1);
    // `@bob` must not match `@bobby`.
    if (Number.isNaN(after) || !/[A-Za-z0-9_-]/.test(String.fromCharCode(after))) return at;
    at = content.indexOf(`@${name}`, at + 1);
  }
  return -1;
}
