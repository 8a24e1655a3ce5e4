/**
 * Dependencies point one way: the core defines the SPIs, `src/policies/` and the plugin implement
 * them. Read from the source files' own import lines, so an upward import or a cycle fails here.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { cyclesIn, importGraph } from '../helpers/import-graph.ts';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');

const graph = importGraph(SRC);

const DATABASE_CLIENTS = ['better-sqlite3', 'pg', 'ioredis', 'bullmq'];

/** The database clients a file names in an import, an export or a `require`/`import()` string. */
function clientsOf(file: string): string[] {
  const text = readFileSync(join(SRC, file), 'utf8');
  const specifiers = [
    ...text.matchAll(/(?:from\s+|import\s*\(\s*|require\s*\(\s*|\)\s*\(\s*)'([^']+)'/g),
  ].map((m) => m[1] as string);
  return specifiers.filter((s) => DATABASE_CLIENTS.some((c) => s === c || s.startsWith(`${c}/`)));
}

function cyclesWithin(prefix: string): string[][] {
  return cyclesIn(graph, (file) => file.startsWith(prefix));
}

/**
 * The core's rooms and where each may look: the SPI (the public interfaces) at the bottom, shared
 * helpers over it, the loop over those (it knows nothing of stores: it reaches durability through
 * core/loop/durability.ts), durability over the loop, and the orchestrator (core/*.ts) on top.
 */
const CORE_ROOMS: Readonly<Record<string, readonly string[]>> = {
  'core/spi/': ['core/spi/'],
  'core/shared/': ['core/spi/', 'core/shared/'],
  'core/loop/': ['core/spi/', 'core/shared/', 'core/loop/'],
  'core/durable/': ['core/spi/', 'core/shared/', 'core/loop/', 'core/durable/'],
};

function roomOf(file: string): string | undefined {
  return Object.keys(CORE_ROOMS).find((room) => file.startsWith(room));
}

function roomViolations(): string[] {
  return [...graph].flatMap(([file, imports]) => {
    const room = roomOf(file);
    if (room === undefined) return [];
    const allowed = CORE_ROOMS[room] ?? [];
    return imports
      .filter((i) => i.startsWith('core/') && !allowed.some((a) => i.startsWith(a)))
      .map((i) => `${file} -> ${i}`);
  });
}

describe('layering of the source', () => {
  it('reads the imports it checks (the graph is not empty)', () => {
    expect(graph.get('core/loop/run.ts')).toContain('core/spi/policy.ts');
    expect(graph.get('policies/termination.ts')).toContain('core/spi/policy.ts');
  });

  it('has no import from src/core into src/policies or src/observability', () => {
    const upward = [...graph]
      .filter(([file]) => file.startsWith('core/'))
      .flatMap(([file, imports]) =>
        imports.filter((i) => !i.startsWith('core/')).map((i) => `${file} -> ${i}`),
      );
    expect(upward).toEqual([]);
  });

  it('has no import from src/policies into src/observability', () => {
    const sideways = [...graph]
      .filter(([file]) => file.startsWith('policies/'))
      .flatMap(([file, imports]) =>
        imports.filter((i) => i.startsWith('observability/')).map((i) => `${file} -> ${i}`),
      );
    expect(sideways).toEqual([]);
  });

  it('lets stores and the testing kit import the core (stores also their shared helpers), and nothing else outside their folder', () => {
    const outside = [...graph]
      .filter(([file]) => file.startsWith('stores/') || file.startsWith('testing/'))
      .flatMap(([file, imports]) => {
        const own = file.startsWith('stores/') ? file.split('/').slice(0, 2).join('/') : 'testing';
        return imports
          .filter(
            (i) =>
              !i.startsWith('core/') &&
              !i.startsWith(`${own}/`) &&
              !(own.startsWith('stores/') && i.startsWith('stores/shared/')),
          )
          .map((i) => `${file} -> ${i}`);
      });
    expect(outside).toEqual([]);
    expect(graph.get('stores/sqlite/store.ts')).toContain('core/spi/store.ts');
    expect(graph.get('testing/kit.ts')).toContain('core/spi/store.ts');
  });

  it('has no database client in the core, the policies or the root entry point; stores load theirs', () => {
    const files = [...graph.keys()].filter(
      (f) => f.startsWith('core/') || f.startsWith('policies/') || f === 'index.ts',
    );
    expect(files.flatMap((f) => clientsOf(f).map((c) => `${f} -> ${c}`))).toEqual([]);
    expect(
      [...graph.keys()]
        .filter((f) => f === 'index.ts' || f.startsWith('core/'))
        .flatMap((f) =>
          (graph.get(f) ?? [])
            .filter((i) => i.startsWith('stores/') || i.startsWith('testing/'))
            // The in-memory store has no client and ships in the root entry point.
            .filter((i) => !(f === 'index.ts' && i.startsWith('stores/memory/')))
            .map((i) => `${f} -> ${i}`),
        ),
    ).toEqual([]);
    // The check reads what it means to: the SQLite store names its client.
    expect(clientsOf('stores/sqlite/store.ts')).toContain('better-sqlite3');
  });

  it("keeps the core's rooms apart: the loop imports no store session, the SPI nothing above it", () => {
    expect(roomViolations()).toEqual([]);
    // The rooms are read from the files: the loop's door and the session that implements it.
    expect(graph.get('core/durable/session.ts')).toContain('core/loop/durability.ts');
    expect(graph.get('core/loop/run.ts')).toContain('core/loop/durability.ts');
  });

  it('finds an import that crosses a room (the check can fail)', () => {
    graph.set('core/loop/__x.ts', ['core/durable/session.ts']);
    try {
      expect(roomViolations()).toEqual(['core/loop/__x.ts -> core/durable/session.ts']);
    } finally {
      graph.delete('core/loop/__x.ts');
    }
  });

  it('has no import cycle anywhere in src', () => {
    expect(cyclesWithin('')).toEqual([]);
  });

  it('has no import cycle inside src/core', () => {
    expect(cyclesWithin('core/')).toEqual([]);
  });

  it('finds a cycle when there is one (the check can fail)', () => {
    graph.set('core/__a.ts', ['core/__b.ts']);
    graph.set('core/__b.ts', ['core/__a.ts']);
    try {
      expect(cyclesWithin('core/').length).toBeGreaterThan(0);
    } finally {
      graph.delete('core/__a.ts');
      graph.delete('core/__b.ts');
    }
  });
});
