/**
 * Every replay command the docs show runs as shown, where the paragraph above it says it runs
 * (issue 43, finding 17): the `sh` blocks of docs/replay.md and examples/record-replay/README.md
 * that run `conversation-orchestrator replay` or `npm run replay` (docs/replay.md's walkthrough
 * excepted: test/docs/replay-walkthrough.test.ts runs those over a recording of the demo). A block
 * whose paragraph says "from a clone" runs in the repository; one that says "where the package is
 * installed" runs in a fresh project with the package installed from a tarball, beside the files
 * it names: the example's recording, the page's `candidate.ts` and the example's `candidates.ts`.
 *
 * The tarball is the package as `npm pack` makes it (tsconfig.build.json's output, package.json
 * and the schemas), built into a folder of this file's own: the repository's dist/ is rebuilt by
 * other files running beside this one.
 */
import {
  copyFileSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshApp, NPM_FLAGS, npm, pack, ROOT, run, TSC } from '../helpers/package-install.ts';
import { readmeCodeBlocks } from '../helpers/readme.ts';

const PAGES = ['docs/replay.md', 'examples/record-replay/README.md'];
/** docs/replay.md's walkthrough, run by test/docs/replay-walkthrough.test.ts. */
const WALKTHROUGH = '## Recording the demo and replaying it';

type Place = 'clone' | 'installed';

interface ShownCommand {
  readonly page: string;
  readonly line: number;
  readonly place: Place;
  readonly code: string;
}

/** The paragraph right above line `line` (1-based) of `text`, on one line. */
function paragraphAbove(text: string, line: number): string {
  const lines = text.split('\n').slice(0, line - 1);
  while (lines.length > 0 && (lines.at(-1) as string).trim() === '') lines.pop();
  const paragraph: string[] = [];
  while (lines.length > 0 && (lines.at(-1) as string).trim() !== '') {
    paragraph.unshift(lines.pop() as string);
  }
  return paragraph.join(' ');
}

/** Where the paragraph says its block runs; an error when it says neither or both. */
function placeOf(paragraph: string, where: string): Place {
  const clone = /from a clone/i.test(paragraph);
  const installed = /where the package is installed/i.test(paragraph);
  if (clone === installed) {
    throw new Error(
      `${where}: a replay command whose paragraph does not say where it runs ("from a clone" or "where the package is installed"): ${JSON.stringify(paragraph)}`,
    );
  }
  return clone ? 'clone' : 'installed';
}

/** The replay commands of one page, each with where its paragraph says it runs. */
function replayCommands(page: string, text: string): ShownCommand[] {
  return readmeCodeBlocks(text)
    .filter((b) => b.lang === 'sh' && b.heading !== WALKTHROUGH)
    .filter((b) => /conversation-orchestrator replay |npm run replay /.test(b.code))
    .map((b) => ({
      page,
      line: b.line,
      place: placeOf(paragraphAbove(text, b.line), `${page}:${b.line}`),
      code: b.code,
    }));
}

const shown = PAGES.flatMap((page) => replayCommands(page, readFileSync(join(ROOT, page), 'utf8')));

/** Runs a block as a shell script (every line, `set -e`) in `cwd`. */
function sh(code: string, cwd: string) {
  return run('sh', ['-ec', code], { cwd, maxBuffer: 16 * 1024 * 1024, timeout: 120_000 });
}

/** The files a command's `--json` and `--html` name, checked after it ran in `cwd`. */
function expectReports(code: string, cwd: string): void {
  const json = /--json (\S+)/.exec(code)?.[1];
  const html = /--html (\S+)/.exec(code)?.[1];
  if (json !== undefined) {
    const report = JSON.parse(readFileSync(join(cwd, json), 'utf8')) as { conversations: number };
    expect(report.conversations).toBe(30);
  }
  if (html !== undefined)
    expect(readFileSync(join(cwd, html), 'utf8')).toContain('<svg id="chart"');
}

let work: string;
let app: string;

/**
 * A user's project: the package installed from its tarball (its peers as npm resolves them; tsx
 * as well where Node does not strip types, as the docs say), the example's recording as
 * `desks.ndjson` and `recordings/desks.ndjson`, its `candidates.ts`, and docs/replay.md's
 * `candidate.ts`.
 */
beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'replay-commands-'));
  const pkg = join(work, 'package');
  mkdirSync(pkg);
  await run(process.execPath, [TSC, '-p', 'tsconfig.build.json', '--outDir', join(pkg, 'dist')], {
    cwd: ROOT,
  });
  copyFileSync(join(ROOT, 'package.json'), join(pkg, 'package.json'));
  cpSync(join(ROOT, 'schemas'), join(pkg, 'schemas'), { recursive: true });
  const tarball = await pack(pkg, work, ['--ignore-scripts']);
  app = freshApp(join(work, 'app'), 'app');
  mkdirSync(join(app, 'recordings'));
  const stripsTypes = Boolean((process.features as { typescript?: unknown }).typescript);
  await npm(app, ['install', ...NPM_FLAGS, tarball, ...(stripsTypes ? [] : ['tsx'])]);
  const recording = join(app, 'desks.ndjson');
  await run(
    process.execPath,
    ['--import', 'tsx', 'examples/record-replay/main.ts', '--keep', recording],
    { cwd: ROOT },
  );
  copyFileSync(recording, join(app, 'recordings/desks.ndjson'));
  copyFileSync(join(ROOT, 'examples/record-replay/candidates.ts'), join(app, 'candidates.ts'));
  const candidate = readmeCodeBlocks(readFileSync(join(ROOT, 'docs/replay.md'), 'utf8')).find(
    (b) => b.lang === 'ts' && b.code.startsWith('// candidate.ts\n'),
  );
  if (candidate === undefined) throw new Error('docs/replay.md shows no `// candidate.ts` block');
  writeFileSync(join(app, 'candidate.ts'), candidate.code);
}, 300_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('the replay commands the docs show', () => {
  it('shows each form on both pages: from a clone and where the package is installed', () => {
    expect(shown.map((c) => `${c.page} ${c.place}`)).toEqual([
      'docs/replay.md installed',
      'docs/replay.md clone',
      'examples/record-replay/README.md clone',
      'examples/record-replay/README.md installed',
    ]);
    for (const c of shown) {
      expect(c.code).toMatch(
        c.place === 'clone' ? /^npm run replay -- /m : /^npx conversation-orchestrator replay /m,
      );
    }
  });

  it.each(shown.map((c) => [`${c.page}:${c.line} (${c.place})`, c] as const))(
    'runs %s as shown',
    async (_, command) => {
      const cwd = command.place === 'clone' ? ROOT : app;
      const { stdout } = await sh(command.code, cwd);
      expect(stdout).toMatch(
        /(^|\n)replayed 30 conversations against any_of\(converged,max_dispatches\)\n/,
      );
      expectReports(command.code, cwd);
    },
  );

  it('refuses a replay command whose paragraph does not say where it runs', () => {
    const page =
      '## The command\n\n```sh\nnpx conversation-orchestrator replay a.ndjson --policy ./p.ts\n```\n';
    expect(() => replayCommands('page.md', page)).toThrow(
      /page\.md:3: a replay command whose paragraph does not say where it runs/,
    );
  });
});
