/**
 * Every TypeScript block of the documentation (README.md, every docs/*.md, every example's
 * README: see docPages) type-checks with `tsc` under the repository's strict settings, importing
 * the package by name as a user would (mapped onto src/, so the check never reads a stale build);
 * the self-contained blocks also run. A block that relies on names from the prose around it
 * declares them in an HTML comment right above its fence (`<!-- context: ... -->`).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { startOtlpReceiver } from '../helpers/otlp-receiver.ts';
import { docPages, type ReadmeCodeBlock, readmeCodeBlocks } from '../helpers/readme.ts';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../..');
const DIR = join(ROOT, '.tmp/readme');
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');

interface Block extends ReadmeCodeBlock {
  /** The page it is on, from the repository root: `README.md`, `docs/telemetry.md`. */
  readonly page: string;
  readonly name: string;
  readonly file: string;
}

const pages = docPages();
const blocks: Block[] = (() => {
  const all = pages.flatMap((page) =>
    readmeCodeBlocks(page.text)
      .filter((b) => b.lang === 'ts' || b.lang === 'typescript')
      .map((b) => ({ ...b, page: page.path })),
  );
  const seen = new Map<string, number>();
  return all.map((b, i) => {
    const key = `${b.page} ${b.heading}`;
    const n = (seen.get(key) ?? 0) + 1;
    seen.set(key, n);
    return { ...b, name: `${key} #${n}`, file: `block-${i + 1}.ts` };
  });
})();

const quickStartFile = blocks.find(
  (b) => b.page === 'README.md' && b.heading === '## Quick start',
)?.file;

/** `file(line,col): error TSxxxx: message` lines of one tsc run, by file. */
const diagnostics = new Map<string, string[]>();

function source(block: Block): string {
  // The docs save their files at the repository root (`my-ops.ts` beside `ops/`): relative
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
        // TypeScript 7's rootDir defaults to this folder; the blocks import the sources above it.
        rootDir: '../..',
        moduleDetection: 'force',
        paths: {
          'conversation-orchestrator': ['../../src/index.ts'],
          'conversation-orchestrator/observability': ['../../src/observability/index.ts'],
          'conversation-orchestrator/replay': ['../../src/replay/index.ts'],
          'conversation-orchestrator/sqlite': ['../../src/stores/sqlite/index.ts'],
          'conversation-orchestrator/testing': ['../../src/testing/index.ts'],
          'conversation-orchestrator/bullmq': ['../../src/fleet/index.ts'],
          'conversation-orchestrator/redis': ['../../src/stores/redis/index.ts'],
          'conversation-orchestrator/postgres': ['../../src/stores/postgres/index.ts'],
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
    // Point at the page's line: context lines come first in the file.
    const where = block
      ? `${block.page}:${block.line + Number(row) - (block.context?.trim().split('\n').length ?? 0)}:${col}`
      : `${file}:${row}:${col}`;
    diagnostics.set(file, [...(diagnostics.get(file) ?? []), `${where} ${message}`]);
  }
}, 120_000);

describe('the code in the README and docs/', () => {
  it('reads the README and every page of docs/, and has TypeScript blocks to check', () => {
    const paths = pages.map((p) => p.path);
    expect(paths.slice(0, 1)).toEqual(['README.md']);
    for (const page of ['loop', 'telemetry', 'ops', 'service', 'performance', 'design-notes']) {
      expect(paths).toContain(`docs/${page}.md`);
    }
    expect(blocks.filter((b) => b.page === 'README.md').length).toBeGreaterThanOrEqual(2);
    expect(blocks.filter((b) => b.page.startsWith('docs/')).length).toBeGreaterThanOrEqual(3);
  });

  it('would catch a broken block', () => {
    expect(diagnostics.get('control.ts')).toEqual([
      "control.ts:1:14 error TS2322: Type 'string' is not assignable to type 'number'.",
    ]);
  });

  for (const block of blocks) {
    it(`type-checks ${block.name} (line ${block.line})`, () => {
      expect(diagnostics.get(block.file) ?? []).toEqual([]);
    });
  }

  it('runs the quick start as written and prints what the README says', async () => {
    const quickStart = blocks.find((b) => b.file === quickStartFile);
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

  it('runs every other self-contained block without an error, exporting spans as OTLP JSON', async () => {
    // The blocks that start the SDK export to a local receiver, which takes JSON only.
    const receiver = await startOtlpReceiver();
    const env = {
      ...process.env,
      TSX_TSCONFIG_PATH: join(DIR, 'tsconfig.json'),
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    };
    const runnable = blocks.filter((b) => b.context === undefined && b.file !== quickStartFile);
    for (const block of runnable) {
      await expect(
        run(process.execPath, ['--import', 'tsx', join(DIR, block.file)], {
          cwd: ROOT,
          env,
          timeout: 30_000,
        }).then(({ stderr }) => stderr || 'ran'),
        block.name,
      ).resolves.toBe('ran');
    }
    await receiver.close();
    // The README's Observe it program and the telemetry page's one file.
    const names = new Set(receiver.spans.map((s) => s.name));
    expect(names).toContain('invoke_workflow counter');
    expect(names).toContain('invoke_workflow desks');
  });

  it('runs every block that starts the SDK with no collector listening: exit 0, the export error said', async () => {
    // A port nothing listens on: one that was just free.
    const port = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const address = server.address();
        server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
      });
    });
    const env = {
      ...process.env,
      TSX_TSCONFIG_PATH: join(DIR, 'tsconfig.json'),
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
    };
    const withSdk = blocks.filter(
      (b) => b.context === undefined && /\bsdk\.start\(\)/.test(b.code),
    );
    // The README's Observe it, the telemetry page's one file, the sampling page's Wiring it.
    expect(withSdk.map((b) => b.page)).toEqual(
      expect.arrayContaining(['README.md', 'docs/telemetry.md', 'docs/sampling.md']),
    );
    for (const block of withSdk) {
      const { stderr } = await run(process.execPath, ['--import', 'tsx', join(DIR, block.file)], {
        cwd: ROOT,
        env,
        timeout: 30_000,
      }).catch((error: { code?: number; stderr?: string }) => ({
        stderr: `exit ${error.code}: ${error.stderr}`,
      }));
      expect(stderr.trim(), block.name).toMatch(/^spans not exported: .*ECONNREFUSED/);
    }
  }, 120_000);
});
