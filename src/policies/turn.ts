/**
 * Turn policies: which responders answer the message at the head of the queue.
 * A policy's `start()` is called once per conversation, so rotation state never leaks between
 * conversations. A plain function is accepted too: it is a stateless policy.
 */
import type { TurnFunction, TurnPolicy, TurnSelection } from '../core/spi/policy.ts';
import type { Responder } from '../core/spi/types.ts';

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
   * Also read `@name` mentions from string content when a message has no `recipients` (what a
   * mention is: see `addressed()`).
   * @default true
   */
  readonly mentions?: boolean;
}

/**
 * The message names who answers: its `recipients`, else `@name` mentions in string content.
 * A message that names nobody is answered by nobody. Unknown names fail the run clearly.
 *
 * A mention is an `@` that starts the text or follows a character that cannot be part of a name
 * (anything but ASCII letters, digits, `_`, `.`, `:` and `-`: a space, `(`, `,` …), followed by
 * the whole of a responder's name, followed by the end of the text or a character that cannot
 * be part of a name, where a run of `.` and `:` just after the name counts as punctuation
 * ending the sentence when what follows the run cannot be part of a name either. When several
 * names fit at one `@` (`bob` and `bob.`), the longest is meant. Names are matched exactly
 * (case included); each responder answers once, in construction order, however often it is
 * mentioned. With responders `bob`, `bob.smith` and `carol`:
 * - `"hi @bob, and @carol."` selects `bob` and `carol`
 * - `"hi @bob.smith"` selects `bob.smith` only, `"@bob: please"` and `"ask @bob..."` select `bob`
 * - `"mail it to carol@bob.example.com"` selects nobody (the `@` follows a name character, and
 *   `bob.example.com` is not a name), nor does `"@bobby"` or `"@bob-2"`
 *
 * Each `@` costs one look at the name that follows it (names are at most 64 characters), so a
 * 9 MB content is read once.
 */
export function addressed<S, C = unknown>(options: AddressedOptions = {}): TurnPolicy<S, C> {
  const mentions = options.mentions ?? true;
  const NONE: TurnSelection<S, C> = [];
  return {
    name: 'addressed',
    stateless: true,
    start(responders) {
      const names = responders.map((r) => r.name);
      const known = new Set(names);
      return (message) => {
        if (message.recipients !== undefined) return message.recipients;
        if (!mentions || typeof message.content !== 'string') return NONE;
        const mentioned = mentionedNames(message.content, known);
        if (mentioned.size === 0) return NONE;
        return names.filter((name) => mentioned.has(name));
      };
    },
  };
}

/**
 * An `@` not preceded by a name character (the name rule's: ASCII letters, digits, `_.:-`), and
 * the longest run of name characters after it.
 */
const MENTION = /(?<![A-Za-z0-9_.:-])@([A-Za-z0-9_.:-]+)/g;
/** The longest a responder name can be (the name rule). */
const MAX_NAME = 64;

/** The names of `known` that `content` mentions (see `addressed()`). */
function mentionedNames(content: string, known: ReadonlySet<string>): Set<string> {
  const mentioned = new Set<string>();
  if (!content.includes('@')) return mentioned;
  for (const match of content.matchAll(MENTION)) {
    const run = match[1] as string;
    // The run is the name, then perhaps `.` and `:` ending a sentence: try the longest first.
    let end = Math.min(run.length, MAX_NAME);
    if (end < run.length && !isPunctuation(run, end, run.length)) continue;
    while (end > 0) {
      const name = run.slice(0, end);
      if (known.has(name)) {
        mentioned.add(name);
        break;
      }
      const last = run.charCodeAt(end - 1);
      if (last !== DOT && last !== COLON) break;
      end--;
    }
  }
  return mentioned;
}

const DOT = 0x2e;
const COLON = 0x3a;

/** Whether `text[from, to)` is only `.` and `:`. */
function isPunctuation(text: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c !== DOT && c !== COLON) return false;
  }
  return true;
}
