import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createRotatingFileSink } from '../../src/replay/index.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'rotating-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const line = (i: number) => `${JSON.stringify({ i, pad: 'x'.repeat(1000) })}\n`;

describe('createRotatingFileSink', () => {
  it('rotates at maxFileBytes and keeps maxFiles, every line whole', async () => {
    const sink = createRotatingFileSink({ dir, maxFileBytes: 10_000, maxFiles: 3 });
    await Promise.all(Array.from({ length: 100 }, (_, i) => sink.write(line(i))));
    await sink.close();
    const names = readdirSync(dir).sort();
    expect(names).toHaveLength(3);
    expect(sink.files().map((f) => basename(f))).toEqual(names);
    for (const name of names) {
      expect(name).toMatch(/^recording-\d{8}T\d{6}Z-\d{6}\.ndjson$/);
      expect(statSync(join(dir, name)).size).toBeLessThanOrEqual(10_000);
    }
    const kept = names.flatMap((n) =>
      readFileSync(join(dir, n), 'utf8')
        .trimEnd()
        .split('\n')
        .map((l) => (JSON.parse(l) as { i: number }).i),
    );
    // The newest lines, in order: 9 lines of ~1 KB per file.
    expect(kept).toEqual(Array.from({ length: kept.length }, (_, k) => 100 - kept.length + k));
    expect(kept.length).toBeGreaterThanOrEqual(19);
  });

  it('counts the files of an earlier run against maxFiles, and leaves other files alone', async () => {
    writeFileSync(join(dir, 'notes.txt'), 'mine');
    const first = createRotatingFileSink({ dir, maxFileBytes: 2_000, maxFiles: 2 });
    for (let i = 0; i < 3; i++) await first.write(line(i));
    await first.close();
    expect(readdirSync(dir).filter((f) => f.endsWith('.ndjson'))).toHaveLength(2);
    const second = createRotatingFileSink({ dir, maxFileBytes: 2_000, maxFiles: 2 });
    await second.write(line(3));
    await second.close();
    expect(readdirSync(dir).filter((f) => f.endsWith('.ndjson'))).toHaveLength(2);
    expect(readdirSync(dir)).toContain('notes.txt');
  });

  it('refuses bad options with what was expected', () => {
    expect(() => createRotatingFileSink({ dir, maxFiles: 0 })).toThrow(
      'Expected `createRotatingFileSink({ maxFiles })` to be a positive integer, got `0` (number)',
    );
    expect(() => createRotatingFileSink({ dir, prefix: '../x' })).toThrow(
      'createRotatingFileSink({ prefix })',
    );
  });
});
