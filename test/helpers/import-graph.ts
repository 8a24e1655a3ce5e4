/**
 * The import graph of a folder's TypeScript files, read from their own import lines, and the
 * cycles in it: what the layering tests of src/, ops/ and service/ check.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Every relative import (`import`, `import type`, `export … from`) of `file`, relative to `base`. */
function importsOf(file: string, base: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:import|export)\s[^'";]*?from\s+'(\.{1,2}\/[^']+)'/g)].map((m) =>
    relative(base, resolve(dirname(file), m[1] as string)),
  );
}

/**
 * Each `.ts` file under `dir` with its relative imports, both as paths relative to `base`
 * (default `dir`): `{ 'core/loop/run.ts' => ['core/spi/policy.ts', …] }`.
 */
export function importGraph(dir: string, base: string = dir): Map<string, string[]> {
  return new Map(sourceFiles(dir).map((f) => [relative(base, f), importsOf(f, base)]));
}

/** The import cycles among the files `within` accepts, each as the path round it. */
export function cyclesIn(
  graph: ReadonlyMap<string, readonly string[]>,
  within: (file: string) => boolean,
): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (node: string, path: string[]): void => {
    if (state.get(node) === 'done') return;
    if (state.get(node) === 'visiting') {
      found.push([...path.slice(path.indexOf(node)), node]);
      return;
    }
    state.set(node, 'visiting');
    for (const next of graph.get(node) ?? []) if (within(next)) visit(next, [...path, node]);
    state.set(node, 'done');
  };
  for (const node of graph.keys()) if (within(node)) visit(node, []);
  return found;
}
