/**
 * Dependencies inside the ops bundle point one way: the config's and the rules' shapes sit one
 * floor down (ops/config-types.ts, ops/rule-model.ts), the checks, rule modules and dashboards
 * build on them, and ops/config.ts and ops/rules.ts assemble. Read from the files' own import
 * lines (as test/package/layering.test.ts reads src/), so a cycle fails here.
 */
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { cyclesIn, importGraph } from '../helpers/import-graph.ts';

const OPS = resolve(dirname(fileURLToPath(import.meta.url)), '../../ops');

const graph = importGraph(OPS);

/** The imports of a file that stay inside ops/ (not src/ or service/). */
function insideOps(file: string): string[] {
  return (graph.get(file) ?? []).filter((i) => !i.startsWith('..'));
}

const cycles = (): string[][] => cyclesIn(graph, (file) => !file.startsWith('..'));

describe('layering of the ops bundle', () => {
  it('reads the imports it checks (the graph is not empty)', () => {
    expect(graph.get('config.ts')).toContain('slo-config.ts');
    expect(graph.get('rules.ts')).toContain('slo.ts');
    expect(graph.get('dashboards/slo.ts')).toContain('config-types.ts');
    expect(graph.get('slo-config.ts')).toContain('../src/observability/metrics.ts');
  });

  it('has no import cycle inside ops/', () => {
    expect(cycles()).toEqual([]);
  });

  it('keeps the shapes of the config and the rules a floor down, importing none of their readers', () => {
    expect(insideOps('config-types.ts')).toEqual([]);
    expect(insideOps('rule-model.ts')).toEqual(['config-types.ts']);
    // The modules ops/config.ts and ops/rules.ts assemble import neither of them back.
    const back = [...graph.keys()]
      .filter((f) => f !== 'main.ts' && f !== 'config.ts')
      .filter((f) => insideOps(f).includes('config.ts'))
      .concat(
        [...graph.keys()]
          .filter((f) => f !== 'render.ts' && f !== 'rules.ts')
          .filter((f) => insideOps(f).includes('rules.ts')),
      );
    expect(back).toEqual([]);
  });

  it('finds a cycle when there is one (the check can fail)', () => {
    graph.set('__a.ts', ['__b.ts']);
    graph.set('__b.ts', ['__a.ts']);
    try {
      expect(cycles()).toEqual([['__a.ts', '__b.ts', '__a.ts']]);
    } finally {
      graph.delete('__a.ts');
      graph.delete('__b.ts');
    }
  });

  it('would have found the circle between ops/config.ts and the SLO checks', () => {
    const before = graph.get('slo-config.ts') ?? [];
    graph.set('slo-config.ts', [...before, 'config.ts']);
    try {
      // Whichever file the search enters the circle by, the circle is these two files.
      expect(cycles().map((c) => [...new Set(c)].sort())).toContainEqual([
        'config.ts',
        'slo-config.ts',
      ]);
    } finally {
      graph.set('slo-config.ts', before);
    }
  });
});
