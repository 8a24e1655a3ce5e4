/**
 * The demo service's modules import one way: no circle among service/, and each room imports only
 * the rooms below it (http/ at the bottom, then desks/, live/, fleet/; the entry points at
 * service/ over all). Read from the files' own import lines.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { cyclesIn, importGraph } from '../helpers/import-graph.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const graph = importGraph(join(ROOT, 'service'), ROOT);
const cycles = (): string[][] => cyclesIn(graph, (file) => file.startsWith('service/'));

/** The live page's ES modules (served as they are to browsers), each with what it imports. */
const PAGE = join(ROOT, 'service/live/page');
const pageGraph = new Map(
  readdirSync(PAGE)
    .filter((name) => name.endsWith('.js'))
    .map((name): [string, string[]] => [
      `./${name}`,
      [
        ...readFileSync(join(PAGE, name), 'utf8').matchAll(
          /^(?:import|export)\s[^;]*?from\s+'([^']+)'/gm,
        ),
      ].map((m) => m[1] as string),
    ]),
);
/** What the page may import besides its own modules: uPlot, at the URL the service serves it. */
const UPLOT = '/vendor/uPlot.esm.js';

/** The entry points: they may import every room, and nothing imports them. */
const ENTRY_POINTS = ['service/main.ts', 'service/worker.ts', 'service/screenshot.ts'];

/**
 * Where each room of service/ may look within service/ (src/ is below them all): http/ (the
 * server, hosts, exposition, health, routes) reads only the service's config; the desks (market,
 * policies, the pace of starts, approvals, the durable store) add http/; the live page adds the desks (its updates carry
 * approvals); fleet mode adds the live page and the signals. The files at service/ beside the
 * entry points (config, signals, tracing, chromium) read only http/.
 */
const ROOMS: Readonly<Record<string, readonly string[]>> = {
  'service/http/': ['service/http/', 'service/config.ts'],
  'service/desks/': ['service/desks/', 'service/http/', 'service/config.ts'],
  'service/live/': ['service/live/', 'service/http/', 'service/desks/'],
  'service/fleet/': [
    'service/fleet/',
    'service/live/',
    'service/http/',
    'service/desks/',
    'service/config.ts',
    'service/signals.ts',
  ],
  'service/': ['service/http/'],
};

/** The room of a file: the longest prefix of ROOMS it starts with (service/ for the shared files). */
function roomOf(file: string): string | undefined {
  return Object.keys(ROOMS)
    .filter((room) => file.startsWith(room))
    .sort((a, b) => b.length - a.length)[0];
}

/** Every import within service/ that its file's room may not make, as `file -> import`. */
function roomViolations(): string[] {
  return [...graph].flatMap(([file, imports]) => {
    const room = roomOf(file);
    if (room === undefined) return [];
    const allowed = ENTRY_POINTS.includes(file) ? ['service/'] : (ROOMS[room] ?? []);
    return imports
      .filter((i) => i.startsWith('service/'))
      .filter((i) => ENTRY_POINTS.includes(i) || !allowed.some((a) => i.startsWith(a)))
      .map((i) => `${file} -> ${i}`);
  });
}

/**
 * Runs `check` on `target` with the imports `added` put in (by file; a file not in it is added
 * whole), then puts `target` back as it was.
 */
function withImports(
  target: Map<string, string[]>,
  added: Readonly<Record<string, readonly string[]>>,
  check: () => void,
): void {
  const before = new Map(Object.keys(added).map((file) => [file, target.get(file)]));
  for (const [file, imports] of Object.entries(added)) {
    target.set(file, [...(target.get(file) ?? []), ...imports]);
  }
  try {
    check();
  } finally {
    for (const [file, imports] of before) {
      if (imports === undefined) target.delete(file);
      else target.set(file, imports);
    }
  }
}

describe('layering of the demo service', () => {
  it('reads the imports it checks', () => {
    expect(graph.get('service/live/history.ts')).toContain('service/live/updates.ts');
  });

  it('has no import circle (history reads the update types, not the other way round)', () => {
    expect(cycles()).toEqual([]);
  });

  it("keeps the rooms' arrows: http/ imports nothing of desks/, live/ or fleet/, and nothing imports an entry point", () => {
    expect(roomViolations()).toEqual([]);
    // The arrows are read from the files: each room's lowest and highest use.
    expect(graph.get('service/live/live.ts')).toContain('service/http/server.ts');
    expect(graph.get('service/fleet/fleet-mode.ts')).toContain('service/live/live.ts');
    expect(graph.get('service/main.ts')).toContain('service/live/live.ts');
  });

  it('defines the HTTP routes once: both modes serve service/http/routes.ts and match no path of their own', () => {
    for (const mode of ['service/main.ts', 'service/fleet/fleet-mode.ts']) {
      expect(graph.get(mode)).toContain('service/http/routes.ts');
      const source = readFileSync(join(ROOT, mode), 'utf8');
      expect(source).not.toMatch(/pathname\s*===|'\/(?:metrics|healthz|ws)'/);
    }
  });

  it('splits the live page into modules that import only each other and uPlot, with no circle', () => {
    expect(pageGraph.get('./app.js')).toContain('./connection.js');
    expect(pageGraph.get('./chart.js')).toContain(UPLOT);
    const outside = [...pageGraph].flatMap(([file, imports]) =>
      imports.filter((i) => i !== UPLOT && !pageGraph.has(i)).map((i) => `${file} -> ${i}`),
    );
    expect(outside).toEqual([]);
    // Only the chart draws with uPlot; the state and the bounds it keeps import nothing above them.
    expect([...pageGraph].filter(([, imports]) => imports.includes(UPLOT)).map(([f]) => f)).toEqual(
      ['./chart.js'],
    );
    expect(pageGraph.get('./constants.js')).toEqual([]);
    expect(pageGraph.get('./state.js')).toEqual(['./constants.js']);
    expect(cyclesIn(pageGraph, (file) => pageGraph.has(file))).toEqual([]);
    // The check can fail: a circle put in is found.
    withImports(pageGraph, { './state.js': ['./updates.js'] }, () => {
      expect(cyclesIn(pageGraph, (file) => pageGraph.has(file)).length).toBeGreaterThan(0);
    });
  });

  it('finds an import that goes up a room (the check can fail)', () => {
    const added = {
      'service/http/server.ts': ['service/live/live.ts', 'service/main.ts'],
      'service/__x.ts': ['service/desks/market.ts'],
    };
    withImports(graph, added, () => {
      expect(roomViolations()).toEqual([
        'service/http/server.ts -> service/live/live.ts',
        'service/http/server.ts -> service/main.ts',
        'service/__x.ts -> service/desks/market.ts',
      ]);
    });
    expect(graph.has('service/__x.ts')).toBe(false);
  });

  it('finds a circle when there is one (the check can fail)', () => {
    withImports(graph, { 'service/live/updates.ts': ['service/live/history.ts'] }, () => {
      expect(cycles()).toContainEqual([
        'service/live/history.ts',
        'service/live/updates.ts',
        'service/live/history.ts',
      ]);
    });
  });
});
