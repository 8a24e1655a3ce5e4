/**
 * Record and replay: record a day of desk conversations (one NDJSON line each), then ask what a
 * candidate termination policy would have done to them, without running a single responder.
 *
 *   npx tsx examples/record-replay/main.ts                          (the recording is deleted at the end)
 *   npx tsx examples/record-replay/main.ts --keep .tmp/desks.ndjson  (kept there, for the command)
 */
import { createWriteStream, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { finished } from 'node:stream/promises';
import { ConversationOrchestrator, roundRobin } from 'conversation-orchestrator';
import { createConversationRecorder, replay } from 'conversation-orchestrator/replay';
// The quick start's desks (examples/desks.ts): each moves `step` of the way toward its peers.
import { book, DESKS, desk, type Quotes, settled, spread } from '../desks.ts';
import { capped, looser, production as recordedPolicy } from './candidates.ts';

// 1. Record. What replay hands a candidate policy as `state.projection` is what `record` keeps:
// here the spread, which is all the policies below read.
const dir = mkdtempSync(join(tmpdir(), 'record-replay-'));
const keep = process.argv.indexOf('--keep');
const path =
  keep === -1 ? join(dir, 'desks.ndjson') : resolve(process.argv[keep + 1] ?? 'desks.ndjson');
mkdirSync(dirname(path), { recursive: true });
const file = createWriteStream(path);
const recorder = createConversationRecorder<Quotes, number>({
  sink: file,
  record: (state) => ({ spread: spread(state.projection) }),
});
// The policy in production: converged within 0.01 for 3 dispatches, at most 300 dispatches.
const production = settled(300);
for (const [market, step] of [
  ['calm', 0.5],
  ['thin', 0.1],
  ['sluggish', 0.02],
] as const) {
  const orchestrator = new ConversationOrchestrator<Quotes, number>({
    name: `${market}_desks`,
    responders: DESKS.map(desk(step)),
    turnPolicy: roundRobin(),
    projection: book(() => ({ london: 100, new_york: 110, tokyo: 90 })),
    termination: production,
    observers: [recorder],
  });
  for (let i = 0; i < 10; i++) await orchestrator.run({ sender: 'market', content: 0 });
}
const stats = await recorder.close();
file.end(); // the stream is ours: the recorder never ends it
await finished(file);
console.log(`recorded ${stats.written} conversations, dropped ${stats.dropped.queueFull}`);

// 2. Replay the candidates (candidates.ts) over the recording: no responder runs, no model is called.
for (const [name, policy] of Object.entries({ looser, capped, production: recordedPolicy })) {
  const report = await replay(path, policy);
  console.log(
    `${name}: ${report.earlier} earlier, ${report.same} same, ${report.later} later; ` +
      `${report.dispatches.saved} of ${report.dispatches.recorded} dispatches saved; ` +
      `${report.risk.count} cut before they converged`,
  );
}
rmSync(dir, { recursive: true, force: true });
