/**
 * The trading desks of the quick start, for the examples built on them (record-replay,
 * instrumented-service): desks quote a price in turn, each moving toward the mean of its peers'
 * quotes, until the spread (highest minus lowest quote) stays within 0.01. The quick start
 * (examples/quickstart/main.ts) writes the same desks out in full.
 */
import {
  anyOf,
  converged,
  type Message,
  maxDispatches,
  type Projection,
  type Responder,
  type TerminationPolicy,
} from 'conversation-orchestrator';

/** Each desk's latest quote, by desk name. */
export type Quotes = Record<string, number>;

/** The desks, in the order they quote (round robin). */
export const DESKS = ['london', 'new_york', 'tokyo'];

/** The highest quote minus the lowest. */
export const spread = (q: Quotes) => Math.max(...Object.values(q)) - Math.min(...Object.values(q));

/** Desk `name`'s next quote: `step` of the way from its own quote toward its peers' mean. */
export function towardPeers(quotes: Quotes, name: string, step: number): number {
  const peers = Object.entries(quotes).filter(([other]) => other !== name);
  const mean = peers.reduce((sum, [, quote]) => sum + quote, 0) / peers.length;
  const mine = quotes[name] ?? mean;
  return mine + (mean - mine) * step;
}

/** A desk that moves `step` of the way toward its peers' mean on every quote. */
export const desk =
  (step: number) =>
  (name: string): Responder<Quotes, number> => ({
    name,
    respond: (_message, state) => ({
      sender: name,
      content: towardPeers(state.projection, name, step),
    }),
  });

/** The book: the `opening` quotes, then each desk's latest. */
export function book(opening: () => Quotes): Projection<Quotes, number> {
  return {
    initial: opening,
    fold: (quotes: Quotes, message: Message<number>) => ({
      ...quotes,
      [message.sender]: message.content,
    }),
  };
}

/** Converged once the spread stays within 0.01 for 3 dispatches in a row, or `cap` dispatches. */
export function settled(cap: number): TerminationPolicy<Quotes, number> {
  return anyOf(
    converged<Quotes, number>({
      measure: (s) => spread(s.projection),
      tolerance: 0.01,
      consecutive: 3,
    }),
    maxDispatches(cap),
  );
}
