/**
 * The demo service's modules import one way: no circle among service/ (its rooms http/, live/,
 * fleet/, desks/ and the entry points). Read from the files' own import lines.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SERVICE = join(ROOT, 'service');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:import|export)\s[^'";]*?from\s+'(\.{1,2}\/[^']+)'/g)].map((m) =>
    relative(ROOT, resolve(dirname(file), m[1] as string)),
  );
}

const graph = new Map(sourceFiles(SERVICE).map((f) => [relative(ROOT, f), importsOf(f)]));

function cycles(): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (node: string, path: string[]): void => {
    if (state.get(node) === 'done') return;
    if (state.get(node) === 'visiting') {
      found.push([...path.slice(path.indexOf(node)), node]);
      return;
    }
    state.set(node, 'visiting');
    for (const next of graph.get(node) ?? [])
      if (next.startsWith('service/')) visit(next, [...path, node]);
    state.set(node, 'done');
  };
  for (const node of graph.keys()) visit(node, []);
  return found;
}

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
