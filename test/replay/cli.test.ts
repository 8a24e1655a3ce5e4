/**
 * The `conversation-orchestrator replay` command, run as a process: the summary it prints, the
 * JSON and HTML reports, and every bad input with its message and exit code 2.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedConversation, ReplayReport } from '../../src/replay/index.ts';
import { type CliRun, runCli } from '../helpers/replay-cli.ts';

const ROOT = resolve(import.meta.dirname, '../..');
// Inside the repository, so that the policies' imports and tsx resolve from its node_modules.
const DIR = join(ROOT, '.tmp/replay-cli');

function cli(args: string[], cwd = DIR, nodeFlags: string[] = []): Promise<CliRun> {
  return runCli(args, { cwd, nodeFlags });
}

/** The two recordings most tests replay: a.ndjson and b.ndjson, three conversations. */
const BOTH = ['a.ndjson', 'b.ndjson'];

/** `replay` of `recordings` against `policy`, `more` arguments after, in DIR. */
function replay(recordings: readonly string[], policy: string, ...more: string[]): Promise<CliRun> {
  return cli(['replay', ...recordings, '--policy', policy, ...more]);
}

function conversation(id: string, spreads: number[], reason = 'converged'): RecordedConversation {
  return {
    version: 1,
    conversationId: id,
    orchestrator: 'desks',
    startTimeMs: 1.7e12,
    ending: {
      reason,
      policy: reason,
      dispatchCount: spreads.length,
      elapsedMs: 100 * spreads.length,
    },
    usage: { inputTokens: 100 * spreads.length, outputTokens: 20 * spreads.length },
    dispatches: spreads.map((spread, i) => ({
      n: i + 1,
      elapsedMs: 100 * (i + 1),
      responder: 'a',
      queueDepth: 1,
      tokens: { inputTokens: 100, outputTokens: 20 },
      record: { spread },
    })),
  };
}

const LINES = [
  conversation('calm', [8, 4, 2, 1, 0.5, 0.01]),
  conversation('choppy', [9, 9, 9, 9, 9, 9, 9, 9], 'max_dispatches'),
  conversation('late', [9, 8, 7, 6, 5, 4, 3, 2, 1, 0.01]),
].map((c) => JSON.stringify(c));

const POLICY_MJS = `import { anyOf, converged, maxDispatches } from '${join(ROOT, 'src/index.ts')}';
export const looser = anyOf(converged({ measure: (s) => s.projection.spread, tolerance: 1 }), maxDispatches(5));
export const notAPolicy = () => looser;
export default looser;
`;
const POLICY_TS = `import { converged, type TerminationPolicy } from '${join(ROOT, 'src/index.ts')}';
type Spread = { spread: number };
export const looser: TerminationPolicy<Spread, undefined> = converged<Spread, undefined>({ measure: (s) => s.projection.spread, tolerance: 1 });
`;

beforeAll(() => {
  rmSync(DIR, { recursive: true, force: true });
  mkdirSync(DIR, { recursive: true });
  writeFileSync(join(DIR, 'a.ndjson'), `${LINES[0]}\n${LINES[1]}\n`);
  writeFileSync(join(DIR, 'b.ndjson'), `${LINES[2]}\n`);
  writeFileSync(join(DIR, 'cut.ndjson'), `${LINES[0]}\n${LINES[1]}\n${LINES[2]?.slice(0, 50)}`);
  writeFileSync(join(DIR, 'candidate.mjs'), POLICY_MJS);
  writeFileSync(join(DIR, 'candidate.ts'), POLICY_TS);
});

afterAll(() => rmSync(DIR, { recursive: true, force: true }));

describe('conversation-orchestrator replay', () => {
  it('prints the summary table for several files against a .mjs policy', async () => {
    const { code, stdout, stderr } = await replay(BOTH, './candidate.mjs');
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout).toBe(
      [
        'replayed 3 conversations against any_of(converged,max_dispatches)',
        '',
        'candidate ended them  conversations   share',
        'earlier                           3  100.0%',
        'at the same dispatch              0    0.0%',
        'later or unknown                  0    0.0%',
        '',
        '            recorded  saved  share',
        'dispatches        24     10  41.7%',
        'tokens         2,880  1,200  41.7%',
        'time (s)         2.4    1.0  41.7%',
        '',
        'cut before they converged (risk): 1',
        '  late (desks): recorded 10 converged, candidate 5 max_dispatches',
        'ended converged earlier: 1',
        '  calm (desks): recorded 6 converged, candidate 4 converged',
        '',
      ].join('\n'),
    );
  });

  it('loads a .ts policy by its export name (through tsx) and writes the JSON report', async () => {
    const { code, stdout } = await replay(BOTH, 'candidate.ts#looser', '--json', 'out.json');
    expect(code).toBe(0);
    expect(stdout).toContain('replayed 3 conversations against converged');
    const report = JSON.parse(readFileSync(join(DIR, 'out.json'), 'utf8')) as ReplayReport;
    expect(report).toMatchObject({ policy: 'converged', conversations: 3, earlier: 2, later: 1 });
    expect(report.chart.map((p) => p.candidate)).toEqual([4, null, 9]);
  });

  it('writes a self-contained HTML page', async () => {
    const { code } = await replay(BOTH, 'candidate.mjs', '--html', 'out.html');
    expect(code).toBe(0);
    const html = readFileSync(join(DIR, 'out.html'), 'utf8');
    expect(html).toMatch(/^<!doctype html>/);
    expect(html.match(/<circle /g)).toHaveLength(3);
    expect(html).not.toMatch(/https?:\/\/(?!www\.w3\.org)/);
    expect(html).not.toMatch(/<script|<link|src=/);
  });

  it.each([
    [
      ['replay', 'missing.ndjson', '--policy', 'candidate.mjs'],
      /^conversation-orchestrator: no such file: missing\.ndjson\n$/,
    ],
    [
      ['replay', 'cut.ndjson', '--policy', 'candidate.mjs'],
      /cut\.ndjson:3: not JSON \(.*a line cut short/,
    ],
    [
      ['replay', 'a.ndjson', '--policy', 'candidate.mjs#nope'],
      /has no export `nope` \(its exports: default, looser, notAPolicy\)/,
    ],
    [
      ['replay', 'a.ndjson', '--policy', 'candidate.mjs#notAPolicy'],
      /export `notAPolicy` of .*candidate\.mjs is not a termination policy \(\{ name: string, start\(\) \}\) or an object of them by orchestrator name, got a function \(a function: export the policy it makes/,
    ],
    [['replay', 'a.ndjson', '--policy', 'nowhere.mjs'], /--policy nowhere\.mjs: no such file/],
    [['replay', 'a.ndjson'], /--policy is required/],
    [['replay', '--policy', 'candidate.mjs'], /no recording given/],
    [
      ['replay', 'a.ndjson', '--policy', 'candidate.mjs', '--frobnicate'],
      /Unknown option '--frobnicate'/,
    ],
    [['rewind'], /unknown command `rewind`/],
  ])('exits 2 with a clear message for %j', async (args, message) => {
    const { code, stdout, stderr } = await cli(args);
    expect(stdout).toBe('');
    expect(stderr).toMatch(message);
    expect(code).toBe(2);
  });

  it('counts and skips bad lines with --skip-bad', async () => {
    const { code, stdout, stderr } = await replay(['cut.ndjson'], 'candidate.mjs', '--skip-bad');
    expect(code).toBe(0);
    expect(stderr).toMatch(/^skipped .*cut\.ndjson:3: not JSON/);
    expect(stdout).toContain('replayed 2 conversations');
    expect(stdout).toContain('note: 1 bad lines skipped');
  });

  /** Runs `check` in a folder outside the project (no tsx there) holding a.ndjson and p.ts. */
  const outsideTheProject = async (check: (outside: string) => Promise<void>) => {
    const outside = mkdtempSync(join(tmpdir(), 'replay-no-tsx-'));
    try {
      writeFileSync(join(outside, 'a.ndjson'), `${LINES[0]}\n`);
      writeFileSync(
        join(outside, 'p.ts'),
        'export default { name: "p", start: () => () => ({ terminate: false, reason: "continue" }) };\n',
      );
      await check(outside);
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  };

  it('loads a .ts policy where Node strips types itself (22.18+, 24), with no tsx in the project', async () => {
    expect((process.features as { typescript?: unknown }).typescript).toBeTruthy();
    await outsideTheProject(async (outside) => {
      const { code, stdout, stderr } = await cli(
        ['replay', 'a.ndjson', '--policy', 'p.ts'],
        outside,
      );
      expect(stderr).toBe('');
      expect(stdout).toMatch(/^replayed 1 conversation against p\n/);
      expect(code).toBe(0);
    });
  });

  it('says what to install when a .ts policy cannot load (a Node that does not strip types, no tsx)', async () => {
    await outsideTheProject(async (outside) => {
      // A Node without type stripping, as Node 22 before 22.18 is.
      const { code, stderr } = await cli(['replay', 'a.ndjson', '--policy', 'p.ts'], outside, [
        '--no-experimental-strip-types',
      ]);
      expect(stderr).toMatch(
        /p\.ts is TypeScript, and this Node \(v[\d.]+\) does not strip types: install tsx in your project \(npm install --save-dev tsx\)/,
      );
      expect(code).toBe(2);
    });
  });
});
