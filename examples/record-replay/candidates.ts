/**
 * The candidates main.ts replays its recording against, in a module of their own so that the
 * command can load them too:
 *
 *   npm run replay -- .tmp/desks.ndjson --policy ./examples/record-replay/candidates.ts#looser
 */
import { anyOf, converged, maxDispatches } from 'conversation-orchestrator';

/** What the recorder kept of each dispatch (`record`): the spread of the quotes. */
type Recorded = { spread: number };

const spreadWithin = (tolerance: number) =>
  converged<Recorded, undefined>({
    measure: (s) => s.projection.spread,
    tolerance,
    consecutive: 3,
  });

/** A looser tolerance: stops sooner, but is that still agreement? */
export const looser = anyOf(spreadWithin(0.1), maxDispatches(300));

/** A tighter cap: gives up on slow markets sooner. */
export const capped = anyOf(spreadWithin(0.01), maxDispatches(100));

/** The production policy itself: replay reproduces every recorded ending. */
export const production = anyOf(spreadWithin(0.01), maxDispatches(300));
