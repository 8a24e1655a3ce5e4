/**
 * The SQLite store SIGKILLed during commits, 20 times at random moments: after each kill the file
 * opens, `integrity_check` says ok, every stored checkpoint is whole (its state parses and names
 * its own conversation and seq, its pad as long as it says), nothing the killed process saw
 * committed is lost, and the next process takes the dead holder's leases at once and continues
 * each seq chain from the stored seq.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { readCrashState } from '../helpers/crash-state.ts';
import { runAndKill } from '../helpers/network-store-crash.ts';
import { checkedRows } from '../helpers/sqlite-rows.ts';

const KILLS = 20;
const CONVERSATIONS = 8;
const dir = mkdtempSync(join(tmpdir(), 'store-sqlite-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it(`keeps whole checkpoints and every commit it confirmed across ${KILLS} SIGKILLs mid-commit`, async () => {
  const path = join(dir, 'crash.db');
  const stored = new Map<string, number>();
  const advanced: number[] = [];
  for (let kill = 0; kill < KILLS; kill++) {
    const seen = await runAndKill(
      ['sqlite', path, String(CONVERSATIONS)],
      Math.floor(Math.random() * 150),
    );
    const rows = checkedRows(path);
    expect(rows.map((r) => r.id)).toEqual(
      Array.from({ length: CONVERSATIONS }, (_, i) => `c${i}`).sort(),
    );
    let progress = 0;
    for (const row of rows) {
      expect(readCrashState(row.state)).toEqual({ id: row.id, seq: row.seq, whole: true });
      // Nothing the writer saw committed is lost; the chain never goes back.
      expect(row.seq).toBeGreaterThanOrEqual(seen.get(row.id) ?? 0);
      expect(row.seq).toBeGreaterThanOrEqual(stored.get(row.id) ?? 1);
      progress += row.seq - (stored.get(row.id) ?? 1);
      stored.set(row.id, row.seq);
    }
    advanced.push(progress);
  }
  // Each run resumed the conversations from their stored seqs (the killed writer's leases taken
  // at once, or it would have failed) and committed at least once before its kill.
  expect(advanced.filter((p) => p < 1)).toEqual([]);
}, 300_000);
