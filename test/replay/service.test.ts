/**
 * The demo service's `--record DIR`, end to end: it records every conversation it ran into
 * rotating files, says so at shutdown, the lines match the schema, and replaying them against
 * the desks' own policy reproduces every ending.
 */

import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { baseline } from '../../examples/record-replay/desk-candidates.ts';
import { deskTermination } from '../../service/desks/desk-policies.ts';
import { type RecordedConversation, replay } from '../../src/replay/index.ts';
import { schemaErrors } from '../helpers/recording-schema.ts';
import {
  type RunningService,
  runServiceCommand,
  startService,
  stopService,
} from '../helpers/service.ts';
import { BRISK_LOAD } from '../helpers/service-load.ts';

let running: RunningService | undefined;
let dir: string | undefined;
afterEach(async () => {
  await stopService(running);
  running = undefined;
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

const ROOT = join(import.meta.dirname, '../..');

/**
 * A negative control: the candidate docs/replay.md used before the demo's policies had a module
 * of their own: fx_desks's policy (3 desks, `consecutive: 3`) for every orchestrator, where
 * rates_desks runs 4 desks.
 */
const formerDocsCandidate = deskTermination(3, 0.05);

describe('npm start -- --record DIR', () => {
  it("records every conversation it ran, and the walkthrough's baseline (the demo's own policies, from service/desks/desk-policies.ts) reports 0 earlier and 0 later", async () => {
    dir = mkdtempSync(join(tmpdir(), 'service-record-'));
    running = await startService(['--record', dir, ...BRISK_LOAD, '--progress-s', '10']);
    expect(running.stdout()).toContain(
      `recording every conversation into ${dir} (files of at most 16 MiB, the last 8 kept)`,
    );
    await new Promise((r) => setTimeout(r, 2_500));
    running.child.kill('SIGTERM');
    expect(await running.exited).toBe(0);
    const written = Number(/, recorded (\d+) conversations into /.exec(running.stdout())?.[1]);
    expect(written).toBeGreaterThan(20);
    const files = readdirSync(dir);
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(/^recording-\d{8}T\d{6}Z-000001\.ndjson$/);
    const lines = readFileSync(join(dir, files[0] as string), 'utf8')
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as RecordedConversation);
    expect(lines).toHaveLength(written);
    for (const line of lines) expect(schemaErrors(line)).toEqual([]);
    const reasons = new Set(lines.map((l) => l.ending.reason));
    expect(reasons).toContain('converged');
    expect(reasons).toContain('error');
    // The demo is durable: a conversation whose trader left is handed back to the store by the
    // abort, then ended by cancel() in a segment of its own; the recorder joins the two (both ran
    // here) into one line ending aborted. Those the shutdown aborted are left to the next start,
    // not ended: every line is an ending the shutdown counted, and every ending it counted a line.
    for (const line of lines.filter((l) => l.ending.reason === 'aborted')) {
      expect(line.ending.error).toBe('ConversationAbortedError');
      expect(line.dispatches).toHaveLength(line.ending.dispatchCount);
    }
    const ended = Number(/closed\. (\d+) conversations: /.exec(running.stdout())?.[1]);
    expect(written).toBe(ended);
    // The walkthrough's baseline (docs/replay.md): the demo's own policies, by orchestrator, from
    // the module the service builds them with. Nothing changes.
    const report = await replay(lines, baseline);
    expect([report.same, report.earlier, report.later, report.unknown]).toEqual([
      lines.length,
      0,
      0,
      0,
    ]);
    // The control: one policy with consecutive 3 for both stops rates_desks (4 desks) earlier.
    const former = await replay(lines, formerDocsCandidate);
    expect(former.earlier).toBeGreaterThan(0);
    // The walkthrough's command, as docs/replay.md shows it, over the recorded file.
    const { stdout } = await promisify(execFile)(
      'npm',
      [
        'run',
        '-s',
        'replay',
        '--',
        join(dir, files[0] as string),
        '--policy',
        './examples/record-replay/desk-candidates.ts#baseline',
      ],
      { cwd: ROOT },
    );
    expect(stdout).toContain(
      `replayed ${lines.length} conversations against fx_desks: any_of(converged,max_dispatches,timeout), rates_desks: any_of(converged,max_dispatches,timeout)`,
    );
    expect(stdout).toMatch(/\nearlier +0 +0\.0%\n/);
    expect(stdout).toMatch(/\nlater or unknown +0 +0\.0%\n/);
  }, 60_000);

  it('refuses an empty --record', async () => {
    const { status, stderr } = await runServiceCommand(['--record', '']);
    expect(stderr).toContain('Expected --record to be a directory, got ``');
    expect(status).toBe(2);
  });
});
