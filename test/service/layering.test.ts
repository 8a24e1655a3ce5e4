/**
 * The demo service's modules import one way: no circle among service/ (its rooms http/, live/,
 * fleet/, desks/ and the entry points). Read from the files' own import lines.
 */
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { cyclesIn, importGraph } from '../helpers/import-graph.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const graph = importGraph(join(ROOT, 'service'), ROOT);
const cycles = (): string[][] => cyclesIn(graph, (file) => file.startsWith('service/'));

describe('layering of the demo service', () => {
  it('reads the imports it checks', () => {
    expect(graph.get('service/live/history.ts')).toContain('service/live/updates.ts');
  });

  it('has no import circle (history reads the update types, not the other way round)', () => {
    expect(cycles()).toEqual([]);
  });

  it('finds a circle when there is one (the check can fail)', () => {
    const updates = graph.get('service/live/updates.ts') ?? [];
    graph.set('service/live/updates.ts', [...updates, 'service/live/history.ts']);
    try {
      expect(cycles()).toContainEqual([
        'service/live/history.ts',
        'service/live/updates.ts',
        'service/live/history.ts',
      ]);
    } finally {
      graph.set('service/live/updates.ts', updates);
    }
  });
});
