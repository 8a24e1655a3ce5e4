/**
 * The demo service's `--record DIR`, end to end: it records every conversation it ran into
 * rotating files, says so at shutdown, the lines match the schema, and replaying them against
 * the desks' own policy reproduces every ending.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_DISPATCHES, TIMEOUT_MS } from '../service/market.ts';
import { anyOf, converged, maxDispatches, type TerminationPolicy, timeout } from '../src/index.ts';
import { type RecordedConversation, replay } from '../src/replay/index.ts';
import { schemaErrors } from './helpers/recording-schema.ts';
import {
  type RunningService,
  runServiceCommand,
  startService,
  stopService,
} from './helpers/service.ts';

let running: RunningService | undefined;
let dir: string | undefined;
afterEach(async () => {
  await stopService(running);
  running = undefined;
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

/** The desks' termination policy as service/market.ts builds it, over the recorded spread. */
function desksPolicy(desks: number, tolerance: number): TerminationPolicy<unknown, undefined> {
  return anyOf(
    converged<{ spread: number }, undefined>({
      measure: (s) => s.projection.spread,
      tolerance,
      consecutive: desks,
    }),
    maxDispatches(MAX_DISPATCHES),
    timeout(TIMEOUT_MS),
  ) as TerminationPolicy<unknown, undefined>;
}

describe('npm start -- --record DIR', () => {
  it('records every conversation it ran, and replaying them against its own policy changes nothing', async () => {
    dir = mkdtempSync(join(tmpdir(), 'service-record-'));
    running = await startService([
      '--record',
      dir,
      '--rate',
      '60',
      '--concurrency',
      '16',
      '--latency-ms',
      '1',
      '--progress-s',
      '10',
    ]);
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
    expect(reasons).toContain('aborted');
    // fx_desks runs 3 desks, rates_desks 4 (the defaults), both at tolerance 0.05.
    for (const [orchestrator, desks] of [
      ['fx_desks', 3],
      ['rates_desks', 4],
    ] as const) {
      const mine = lines.filter((l) => l.orchestrator === orchestrator);
      expect(mine.length).toBeGreaterThan(5);
      const report = await replay(mine, desksPolicy(desks, 0.05));
      expect([report.same, report.earlier, report.later, report.unknown]).toEqual([
        mine.length,
        0,
        0,
        0,
      ]);
    }
  }, 60_000);

  it('refuses an empty --record', async () => {
    const { status, stderr } = await runServiceCommand(['--record', '']);
    expect(stderr).toContain('Expected --record to be a directory, got ``');
    expect(status).toBe(2);
  });
});
