/**
 * The replay command given hostile input, run as a process: recording strings with terminal
 * control characters, a line past the limit, a candidate that never returns and a candidate
 * module that never finishes loading.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedConversation } from '../../src/replay/index.ts';
import { type CliRun, runCli } from '../helpers/replay-cli.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const DIR = join(ROOT, '.tmp/replay-cli-hostile');
const INDEX = join(ROOT, 'src/index.ts');

/** The command replaying `recording` against `policy`, `more` arguments after. */
function replay(recording: string, policy: string, ...more: string[]): Promise<CliRun> {
  return runCli(['replay', recording, '--policy', policy, ...more], {
    cwd: DIR,
    timeoutMs: 60_000,
  });
}

/**
 * plain.ndjson replayed against `policy` with `option` set to `value`: the command exits 2,
 * saying exactly `stderr` and printing nothing.
 */
async function exitsTwo(policy: string, option: string, value: string, stderr: string) {
  const run = await replay('plain.ndjson', policy, option, value);
  expect(run.stdout).toBe('');
  expect(run.stderr).toBe(stderr);
  expect(run.code).toBe(2);
}

function conversation(id: string, orchestrator: string, dispatches: number): RecordedConversation {
  return {
    version: 1,
    conversationId: id,
    orchestrator,
    startTimeMs: 0,
    ending: {
      reason: 'converged',
      policy: 'converged',
      dispatchCount: dispatches,
      elapsedMs: dispatches,
    },
    dispatches: Array.from({ length: dispatches }, (_, i) => ({
      n: i + 1,
      elapsedMs: i + 1,
      responder: 'a',
      queueDepth: 1,
    })),
  };
}

/** Any control character but the newline, or the bidi override: none may reach the terminal. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e]/;
const NASTY = '\u001b[2J\u001b]0;pwned\u0007\rX\u202e';

beforeAll(() => {
  rmSync(DIR, { recursive: true, force: true });
  mkdirSync(DIR, { recursive: true });
  writeFileSync(
    join(DIR, 'nasty.ndjson'),
    `${JSON.stringify(conversation(`id${NASTY}`, `desks${NASTY}`, 4))}\n`,
  );
  writeFileSync(
    join(DIR, 'plain.ndjson'),
    `${JSON.stringify(conversation('first', 'desks', 3))}\n${JSON.stringify(conversation('second', 'desks', 3))}\n`,
  );
  writeFileSync(
    join(DIR, 'stop-at-2.mjs'),
    `import { stopWhen } from '${INDEX}';
export const early = stopWhen((s) => s.dispatchCount >= 2, 'converged');
export const nasty = { name: ${JSON.stringify(`n${NASTY}`)}, start: () => () => { throw new Error('bad${'\\u001b'}[31m'); } };
`,
  );
  writeFileSync(
    join(DIR, 'spins.mjs'),
    `export const spins = { name: 'spins', start: () => (s) => { if (s.conversationId === 'second' && s.dispatchCount === 2) for (;;) {} return { terminate: false, reason: 'continue' }; } };
export const spinsAtStart = { name: 'spins_at_start', start: () => { for (;;) {} } };
`,
  );
  writeFileSync(
    join(DIR, 'never-loads.mjs'),
    `await new Promise(() => {});
export const looser = { name: 'x', start: () => () => ({ terminate: true, reason: 'x' }) };
`,
  );
  writeFileSync(
    join(DIR, 'loops-at-load.mjs'),
    `for (;;) {}
export default { name: 'x', start: () => () => ({ terminate: true, reason: 'x' }) };
`,
  );
  writeFileSync(
    join(DIR, 'waits-an-hour.mjs'),
    `await new Promise((r) => setTimeout(r, 3_600_000));
export default { name: 'x', start: () => () => ({ terminate: true, reason: 'x' }) };
`,
  );
});
afterAll(() => rmSync(DIR, { recursive: true, force: true }));

describe('recording strings with control characters', () => {
  it('prints them escaped: no ESC, OSC, BEL, CR or bidi override reaches the terminal', async () => {
    const { code, stdout } = await replay('nasty.ndjson', 'stop-at-2.mjs#early');
    expect(code).toBe(0);
    expect(stdout).toContain(
      '  id\\x1b[2J\\x1b]0;pwned\\x07\\rX\\u202e (desks\\x1b[2J\\x1b]0;pwned\\x07\\rX\\u202e): recorded 4 converged, candidate 2 converged',
    );
    expect(stdout).not.toMatch(RAW_CONTROL);
  });

  it('escapes them in the candidate name and in what a failing candidate threw', async () => {
    const { code, stdout } = await replay('nasty.ndjson', 'stop-at-2.mjs#nasty');
    expect(code).toBe(0);
    expect(stdout).toContain(
      'replayed 1 conversation against n\\x1b[2J\\x1b]0;pwned\\x07\\rX\\u202e',
    );
    expect(stdout).toContain('candidate failed at 1: Error: bad\\x1b[31m');
    expect(stdout).not.toMatch(RAW_CONTROL);
  });
});

describe('a line past --max-line-bytes', () => {
  it('exits 2 naming the file and line, or skips it with --skip-bad', async () => {
    writeFileSync(
      join(DIR, 'long.ndjson'),
      `${JSON.stringify(conversation('x'.repeat(2_000), 'desks', 3))}\n${JSON.stringify(conversation('short', 'desks', 3))}\n`,
    );
    const strict = await replay('long.ndjson', 'stop-at-2.mjs#early', '--max-line-bytes', '1000');
    expect(strict.stderr).toBe(
      `conversation-orchestrator: ${join(DIR, 'long.ndjson')}:1: longer than 1000 bytes (maxLineBytes; the recorder writes lines of at most its maxLineChars)\n`,
    );
    expect(strict.code).toBe(2);
    const skipping = await replay(
      'long.ndjson',
      'stop-at-2.mjs#early',
      '--max-line-bytes',
      '1000',
      '--skip-bad',
    );
    expect(skipping.code).toBe(0);
    expect(skipping.stdout).toContain('replayed 1 conversation against');
    expect(skipping.stdout).toContain('note: 1 bad lines skipped');
  });

  it('refuses a --max-line-bytes that is not a positive integer', async () => {
    await exitsTwo(
      'stop-at-2.mjs#early',
      '--max-line-bytes',
      '1e3',
      'conversation-orchestrator: --max-line-bytes: expected a positive integer, got `1e3`\n',
    );
  });
});

describe('a candidate that never returns, or never loads', () => {
  it('stops a check that never returns after --decision-timeout-ms and exits 2 naming the module, export, conversation and dispatch', async () => {
    await exitsTwo(
      'spins.mjs#spins',
      '--decision-timeout-ms',
      '300',
      `conversation-orchestrator: --policy spins.mjs#spins: export \`spins\` of ${join(DIR, 'spins.mjs')}: the check at dispatch 2 of conversation second (the 2nd read) did not return within 300 ms (--decision-timeout-ms): a loop that never ends?\n`,
    );
  });

  it('stops a start() that never returns', async () => {
    await exitsTwo(
      'spins.mjs#spinsAtStart',
      '--decision-timeout-ms',
      '300',
      `conversation-orchestrator: --policy spins.mjs#spinsAtStart: export \`spinsAtStart\` of ${join(DIR, 'spins.mjs')}: start() of conversation 1 (in the order read) did not return within 300 ms (--decision-timeout-ms): a loop that never ends?\n`,
    );
  });

  for (const [module, exportName, shown] of [
    ['never-loads.mjs', '#looser', 'export `looser`'],
    ['loops-at-load.mjs', '', 'its default export (or only termination policy)'],
    ['waits-an-hour.mjs', '', 'its default export (or only termination policy)'],
  ] as const) {
    it(`exits 2 after --load-timeout-ms when ${module} never finishes loading, naming the module and export`, async () => {
      await exitsTwo(
        `${module}${exportName}`,
        '--load-timeout-ms',
        '500',
        `conversation-orchestrator: --policy ${module}${exportName}: loading ${join(DIR, module)} for ${shown} did not finish within 500 ms (--load-timeout-ms): a top-level await that never settles, or a loop at the module's top?\n`,
      );
    });
  }
});
