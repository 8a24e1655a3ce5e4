/**
 * Every TypeScript block of the README type-checks with `tsc` under the repository's strict
 * settings, importing the package by name as a user would (mapped onto src/, so the check never
 * reads a stale build); the self-contained blocks also run. A block that relies on names from the
 * prose around it declares them in an HTML comment right above its fence (`<!-- context: ... -->`).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { type ReadmeCodeBlock, readmeCodeBlocks } from './helpers/readme.ts';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');
const DIR = join(ROOT, '.tmp/readme');
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');

/**
 * Blocks that fail because of a library type another change is fixing, by `heading #n`. Each
 * entry names what it waits for; remove it when that lands.
 */
const PENDING: Readonly<Record<string, string>> = {};

interface Block extends ReadmeCodeBlock {
  readonly name: string;
  readonly file: string;
}

const blocks: Block[] = (() => {
  const all = readmeCodeBlocks(readFileSync(join(ROOT, 'README.md'), 'utf8')).filter(
    (b) => b.lang === 'ts' || b.lang === 'typescript',
  );
  const seen = new Map<string, number>();
  return all.map((b, i) => {
    const n = (seen.get(b.heading) ?? 0) + 1;
    seen.set(b.heading, n);
    return { ...b, name: `${b.heading} #${n}`, file: `block-${i + 1}.ts` };
  });
})();

/** `file(line,col): error TSxxxx: message` lines of one tsc run, by file. */
const diagnostics = new Map<string, string[]>();

function source(block: Block): string {
  // The README saves its files at the repository root (`my-ops.ts` beside `ops/`): relative
  // imports resolve from there, two levels above these copies.
  const code = block.code.replace(/from '\.\//g, "from '../../");
  return block.context === undefined ? code : `${block.context.trim()}\n${code}`;
}

beforeAll(async () => {
  rmSync(DIR, { recursive: true, force: true });
  mkdirSync(DIR, { recursive: true });
  writeFileSync(
    join(DIR, 'tsconfig.json'),
    JSON.stringify({
      extends: '../../tsconfig.json',
      compilerOptions: {
        noEmit: true,
        moduleDetection: 'force',
        paths: {
          'conversation-orchestrator': ['../../src/index.ts'],
          'conversation-orchestrator/observability': ['../../src/observability/index.ts'],
          'conversation-orchestrator/replay': ['../../src/replay/index.ts'],
        },
      },
      include: ['*.ts'],
    }),
  );
  for (const block of blocks) writeFileSync(join(DIR, block.file), source(block));
  // A negative control: the same run must report this file, or it checks nothing.
  writeFileSync(join(DIR, 'control.ts'), "export const dispatches: number = 'many';\n");
  const out = await run(
    process.execPath,
    [TSC, '-p', join(DIR, 'tsconfig.json'), '--pretty', 'false'],
    {
      cwd: ROOT,
    },
  ).then(
    (r) => r.stdout,
    (error: { stdout?: string }) => error.stdout ?? String(error),
  );
  for (const line of out.split('\n')) {
    const m = /^(?:.*[\\/])?([\w-]+\.ts)\((\d+),(\d+)\): (.*)$/.exec(line);
    if (!m) continue;
    const [, file = '', row = '0', col = '0', message = ''] = m;
    const block = blocks.find((b) => b.file === file);
    // Point at the README line: context lines come first in the file.
    const where = block
      ? `README.md:${block.line + Number(row) - (block.context?.trim().split('\n').length ?? 0)}:${col}`
      : `${file}:${row}:${col}`;
    diagnostics.set(file, [...(diagnostics.get(file) ?? []), `${where} ${message}`]);
  }
}, 120_000);

describe('the README code', () => {
  it('has TypeScript blocks to check, and a broken one would be caught', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(3);
    expect(diagnostics.get('control.ts')).toEqual([
      "control.ts:1:14 error TS2322: Type 'string' is not assignable to type 'number'.",
    ]);
  });

  for (const block of blocks) {
    const pending = PENDING[block.name];
    if (pending !== undefined) {
      it.todo(`type-checks ${block.name} (line ${block.line}) once ${pending}`);
      continue;
    }
    it(`type-checks ${block.name} (line ${block.line})`, () => {
      expect(diagnostics.get(block.file) ?? []).toEqual([]);
    });
  }

  it('runs the quick start as written and prints what the README says', async () => {
    const quickStart = blocks.find((b) => b.heading === '## Quick start');
    expect(quickStart?.code).toContain("from 'conversation-orchestrator'");
    const { stdout } = await run(
      process.execPath,
      ['--import', 'tsx', join(DIR, quickStart?.file ?? '')],
      { cwd: ROOT, env: { ...process.env, TSX_TSCONFIG_PATH: join(DIR, 'tsconfig.json') } },
    );
    const lines = stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^dispatch 24: converged after \d+\.\d\d ms$/);
    expect(lines[1]).toBe('converged 24 true');
  });

  it('runs every other self-contained block without an error', async () => {
    const runnable = blocks.filter(
      (b) =>
        b.context === undefined && b.heading !== '## Quick start' && PENDING[b.name] === undefined,
    );
    for (const block of runnable) {
      await expect(
        run(process.execPath, ['--import', 'tsx', join(DIR, block.file)], {
          cwd: ROOT,
          env: { ...process.env, TSX_TSCONFIG_PATH: join(DIR, 'tsconfig.json') },
          timeout: 30_000,
        }).then(() => 'ran'),
        block.name,
      ).resolves.toBe('ran');
    }
  });
});
