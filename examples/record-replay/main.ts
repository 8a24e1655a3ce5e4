/**
 * Record and replay: record a day of desk conversations (one NDJSON line each), then ask what a
 * candidate termination policy would have done to them, without running a single responder.
 *
 *   npx tsx examples/record-replay/main.ts
 */
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import {
  anyOf,
  ConversationOrchestrator,
  converged,
  maxDispatches,
  type Responder,
  roundRobin,
} from 'conversation-orchestrator';
import { createConversationRecorder, replay } from 'conversation-orchestrator/replay';

type Quotes = Record<string, number>;
const spread = (q: Quotes) => Math.max(...Object.values(q)) - Math.min(...Object.values(q));

/** A desk that moves `step` of the way toward its peers' mean on every quote. */
const desk =
  (step: number) =>
  (name: string): Responder<Quotes, number> => ({
    name,
    respond: (_message, state) => {
      const peers = Object.entries(state.projection).filter(([other]) => other !== name);
      const mean = peers.reduce((sum, [, quote]) => sum + quote, 0) / peers.length;
      const mine = state.projection[name] ?? mean;
      return { sender: name, content: mine + (mean - mine) * step };
    },
  });

// 1. Record. What replay hands a candidate policy as `state.projection` is what `record` keeps:
// here the spread, which is all the policies below read.
const dir = mkdtempSync(join(tmpdir(), 'record-replay-'));
const path = join(dir, 'desks.ndjson');
const file = createWriteStream(path);
const recorder = createConversationRecorder<Quotes, number>({
  sink: file,
  record: (state) => ({ spread: spread(state.projection) }),
});
// The policy in production: converged within 0.01 for 3 dispatches, at most 300 dispatches.
const production = anyOf(
  converged<Quotes, number>({
    measure: (s) => spread(s.projection),
    tolerance: 0.01,
    consecutive: 3,
  }),
  maxDispatches(300),
);
for (const [market, step] of [
  ['calm', 0.5],
  ['thin', 0.1],
  ['sluggish', 0.02],
] as const) {
  const orchestrator = new ConversationOrchestrator<Quotes, number>({
    name: `${market}_desks`,
    responders: ['london', 'new_york', 'tokyo'].map(desk(step)),
    turnPolicy: roundRobin(),
    projection: {
      initial: () => ({ london: 100, new_york: 110, tokyo: 90 }),
      fold: (quotes, message) => ({ ...quotes, [message.sender]: message.content }),
    },
    termination: production,
    observers: [recorder],
  });
  for (let i = 0; i < 10; i++) await orchestrator.run({ sender: 'market', content: 0 });
}
const stats = await recorder.close();
file.end(); // the stream is ours: the recorder never ends it
await finished(file);
console.log(`recorded ${stats.written} conversations, dropped ${stats.dropped.queueFull}`);

// 2. Replay two candidates over the recording: no responder runs, no model is called.
type Recorded = { spread: number };
const candidates = {
  // A looser tolerance: stops sooner, but is that still agreement?
  looser: anyOf(
    converged<Recorded, undefined>({
      measure: (s) => s.projection.spread,
      tolerance: 0.1,
      consecutive: 3,
    }),
    maxDispatches(300),
  ),
  // A tighter cap: gives up on slow markets sooner.
  capped: anyOf(
    converged<Recorded, undefined>({
      measure: (s) => s.projection.spread,
      tolerance: 0.01,
      consecutive: 3,
    }),
    maxDispatches(100),
  ),
  // The production policy itself: replay reproduces every recorded ending.
  production: anyOf(
    converged<Recorded, undefined>({
      measure: (s) => s.projection.spread,
      tolerance: 0.01,
      consecutive: 3,
    }),
    maxDispatches(300),
  ),
};
for (const [name, policy] of Object.entries(candidates)) {
  const report = await replay(path, policy);
  console.log(
    `${name}: ${report.earlier} earlier, ${report.same} same, ${report.later} later; ` +
      `${report.dispatches.saved} of ${report.dispatches.recorded} dispatches saved; ` +
      `${report.risk.count} cut before they converged`,
  );
}
rmSync(dir, { recursive: true, force: true });
