/**
 * docs/replay.md's walkthrough ("Recording the demo and replaying it"), run: the demo service
 * records for a few seconds (`--record DIR`, as the page's `npm start` line), stops on SIGINT,
 * and the page's three `npm run replay` commands run over what it wrote. The page's printed
 * figures come from a two-minute run, so they cannot equal a short one's; what holds in every run
 * is held to the page: the same lines and candidates, the same relations between the figures
 * (whole conversations, every one that ended: recorded = ended, the aborted ones whose trader left
 * (ended by cancel() in a segment of their own) included; every report replays them all, with
 * the same recorded totals; shares are their parts; the baseline changes nothing; a looser
 * tolerance never cuts a converging conversation, a budget never converges earlier), and the
 * prose quotes the blocks.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedConversation } from '../../src/replay/index.ts';
import { readmeCodeBlocks } from '../helpers/readme.ts';
import { type RunningService, startService, stopService } from '../helpers/service.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const PAGE = readFileSync(join(ROOT, 'docs/replay.md'), 'utf8');
const HEADING = '## Recording the demo and replaying it';
const CANDIDATES = ['baseline', 'looser', 'budget'] as const;
type CandidateName = (typeof CANDIDATES)[number];

/** What the walkthrough prints: the service's last lines, and each candidate's report. */
interface Walkthrough {
  readonly shutdown: string;
  readonly reports: Readonly<Record<CandidateName, string>>;
}

/** The page's walkthrough: its `npm start` line, what it printed, the commands and the reports. */
function pageWalkthrough(): {
  start: string;
  commands: Record<CandidateName, string>;
  printed: Walkthrough;
  prose: string;
} {
  const at = PAGE.indexOf(`\n${HEADING}\n`);
  const next = PAGE.indexOf('\n## ', at + 1);
  const section = PAGE.slice(at, next < 0 ? undefined : next);
  const blocks = readmeCodeBlocks(section).filter((b) => b.heading === HEADING);
  const sh = blocks.filter((b) => b.lang === 'sh');
  const text = blocks.filter((b) => b.lang === 'text');
  expect(sh.map((b) => b.code.split(' ').slice(0, 2).join(' '))).toEqual([
    'npm start',
    'npm run',
    'npm run',
    'npm run',
  ]);
  expect(text).toHaveLength(4);
  const commands = {} as Record<CandidateName, string>;
  const reports = {} as Record<CandidateName, string>;
  CANDIDATES.forEach((name, i) => {
    commands[name] = (sh[i + 1]?.code ?? '').trim();
    expect(commands[name]).toContain(`desk-candidates.ts#${name}`);
    reports[name] = text[i + 1]?.code ?? '';
  });
  return {
    start: (sh[0]?.code ?? '').trim(),
    commands,
    printed: { shutdown: text[0]?.code ?? '', reports },
    prose: section.replace(/```[\s\S]*?```/g, '').replace(/\s+/g, ' '),
  };
}

const number = (s: string): number => Number(s.replaceAll(',', ''));

/** The figures of the service's shutdown line. */
function shutdownFigures(text: string) {
  const m =
    /, recorded (\d+) conversations into [^\n]*?( \(\d+ dropped\))?, closed\. (\d+) conversations: ([^\n]*)/.exec(
      text,
    );
  if (m === null) throw new Error(`no shutdown line in ${JSON.stringify(text)}`);
  const tally = Object.fromEntries(
    (m[4] ?? '').split(', ').map((part) => {
      const [reason, count] = part.split(' ');
      return [reason as string, Number(count)];
    }),
  );
  return {
    recorded: Number(m[1]),
    dropped: m[2] !== undefined,
    ended: Number(m[3]),
    tally: tally as Record<string, number>,
  };
}

/** The figures of one report as the command prints it. */
function reportFigures(text: string) {
  const row = (label: string) => {
    const m = new RegExp(
      `^${label.replace(/[()]/g, '\\$&')} +([\\d,.]+) +([\\d,.]+)(%| +([\\d.]+)%)$`,
      'm',
    ).exec(text);
    if (m === null) throw new Error(`no row ${label} in ${JSON.stringify(text)}`);
    return m;
  };
  const count = (label: string) => {
    const m = row(label);
    return { n: number(m[1] as string), share: m[2] as string };
  };
  const saving = (label: string) => {
    const m = row(label);
    return {
      recorded: number(m[1] as string),
      saved: number(m[2] as string),
      share: m[4] as string,
    };
  };
  const list = (label: string) => {
    const m = new RegExp(
      `^${label.replace(/[()]/g, '\\$&')}: (none|[\\d,]+)( \\(the first 100 listed\\))?$`,
      'm',
    ).exec(text);
    if (m === null) throw new Error(`no list ${label} in ${JSON.stringify(text)}`);
    const n = m[1] === 'none' ? 0 : number(m[1] as string);
    return { n, firstListed: m[2] !== undefined };
  };
  const replayed = /^replayed ([\d,]+) conversations against (.*)$/m.exec(text);
  if (replayed === null) throw new Error(`no replayed line in ${JSON.stringify(text)}`);
  return {
    conversations: number(replayed[1] as string),
    policy: replayed[2] as string,
    earlier: count('earlier'),
    same: count('at the same dispatch'),
    laterOrUnknown: count('later or unknown'),
    dispatches: saving('dispatches'),
    tokens: saving('tokens'),
    time: saving('time (s)'),
    risk: list('cut before they converged (risk)'),
    convergedEarlier: list('ended converged earlier'),
  };
}

const percent = (part: number, whole: number): string =>
  whole > 0 ? ((100 * part) / whole).toFixed(1) : '0.0';

/**
 * What does not hold between the figures of one walkthrough (the page's, or a run's): [] when
 * every relation holds that every run of it shows.
 */
function problems(w: Walkthrough): string[] {
  const out: string[] = [];
  const say = (ok: boolean, what: string) => {
    if (!ok) out.push(what);
  };
  const s = shutdownFigures(w.shutdown);
  const tallied = Object.values(s.tally).reduce((a, b) => a + b, 0);
  say(tallied === s.ended, `the shutdown's reasons add up to ${tallied}, not ${s.ended}`);
  say(!s.dropped, 'the shutdown says lines were dropped');
  say(
    s.recorded === s.ended,
    `recorded ${s.recorded} conversations, but ${s.ended} ended: each is one whole line`,
  );
  const reports = Object.fromEntries(
    CANDIDATES.map((name) => [name, reportFigures(w.reports[name])]),
  ) as Record<CandidateName, ReturnType<typeof reportFigures>>;
  const first = reports.baseline;
  for (const name of CANDIDATES) {
    const r = reports[name];
    const n = r.conversations;
    say(
      n === s.recorded,
      `${name} replayed ${n} conversations, the service recorded ${s.recorded}`,
    );
    say(
      r.earlier.n + r.same.n + r.laterOrUnknown.n === n,
      `${name}: earlier, same and later add up to ${r.earlier.n + r.same.n + r.laterOrUnknown.n}, not ${n}`,
    );
    for (const [label, c] of [
      ['earlier', r.earlier],
      ['same', r.same],
      ['later', r.laterOrUnknown],
    ] as const) {
      say(
        c.share === percent(c.n, n),
        `${name}: ${label}'s share is ${c.share}, ${c.n} of ${n} is ${percent(c.n, n)}%`,
      );
    }
    say(r.laterOrUnknown.n === 0, `${name}: ${r.laterOrUnknown.n} later or unknown`);
    for (const kind of ['dispatches', 'tokens', 'time'] as const) {
      const k = r[kind];
      say(
        k.recorded === first[kind].recorded,
        `${name}: ${kind} recorded ${k.recorded}, the baseline's ${first[kind].recorded}`,
      );
      // Time is printed to 0.1 s: its share is within a rounding of the printed figures'.
      const exact = percent(k.saved, k.recorded);
      say(
        kind === 'time'
          ? Math.abs(Number(k.share) - (100 * k.saved) / Math.max(k.recorded, 1e-9)) <= 0.15
          : k.share === exact,
        `${name}: ${kind} saved share ${k.share}%, ${k.saved} of ${k.recorded} is ${exact}%`,
      );
    }
    for (const list of [r.risk, r.convergedEarlier])
      say(
        list.firstListed === list.n > 100,
        `${name}: a list of ${list.n} says "the first 100 listed" wrongly`,
      );
    say(
      r.convergedEarlier.n + r.risk.n <= r.earlier.n,
      `${name}: more listed conversations than earlier ones`,
    );
  }
  const b = reports.baseline;
  say(
    b.earlier.n === 0 &&
      b.same.n === b.conversations &&
      b.dispatches.saved === 0 &&
      b.tokens.saved === 0,
    "the baseline (the demo's own policies) changes something",
  );
  say(b.risk.n === 0 && b.convergedEarlier.n === 0, 'the baseline lists conversations');
  say(reports.looser.risk.n === 0, 'a looser tolerance cut conversations before they converged');
  say(
    reports.looser.convergedEarlier.n === reports.looser.earlier.n,
    'a looser tolerance ended conversations earlier other than by converging',
  );
  say(reports.budget.convergedEarlier.n === 0, 'a token budget converged earlier');
  return out;
}

/** A line as it reads with its figures, ids and the recording's directory masked. */
function shape(line: string, dir: string): string {
  return line
    .replaceAll(dir, '.tmp/walkthrough')
    .replace(/conversations: .*$/, 'conversations: <tally>')
    .replace(/[\da-f]{8}-[\da-f]{4}-[\da-f]{4}-[\da-f]{4}-[\da-f]{12}/g, '<id>')
    .replace(/\d[\d,.]*/g, '<n>')
    .replace(/: (none|<n>)( \(the first <n> listed\))?$/, ': <list>')
    .replace(/ +/g, ' ');
}

/** A report's lines before its lists (those are cut on the page), shaped. */
function tables(text: string, dir: string): string[] {
  return text
    .trimEnd()
    .split('\n')
    .filter((l) => !l.startsWith('  '))
    .map((l) => shape(l, dir));
}

const page = pageWalkthrough();

describe("docs/replay.md's walkthrough figures", () => {
  it('hold together as every run of the walkthrough shows (whole conversations: recorded = ended)', () => {
    expect(problems(page.printed)).toEqual([]);
  });

  it('are what the prose says', () => {
    const s = shutdownFigures(page.printed.shutdown);
    const looser = reportFigures(page.printed.reports.looser);
    const budget = reportFigures(page.printed.reports.budget);
    const fmt = (n: number) => n.toLocaleString('en-US');
    expect(page.prose).toContain(
      `the recording holds all ${fmt(s.ended)} that ended, the ${fmt(s.tally.aborted ?? 0)} \`aborted\` included`,
    );
    expect(page.prose).toContain(
      `ends ${looser.earlier.share}% of the conversations a few dispatches sooner, saving ${looser.dispatches.share}% of the dispatches and ${looser.tokens.share}% of the tokens`,
    );
    expect(page.prose).toContain(
      `saved ${budget.tokens.share}% of the tokens, but ${fmt(budget.risk.n)} conversations`,
    );
  });
});

describe('the walkthrough, run', () => {
  let dir = '';
  let running: RunningService | undefined;
  const run: { shutdown: string; reports: Record<CandidateName, string>; files: string[] } = {
    shutdown: '',
    reports: { baseline: '', looser: '', budget: '' },
    files: [],
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'replay-walkthrough-'));
    const recordings = join(dir, 'walkthrough');
    // The page's `npm start -- --record .tmp/walkthrough`, into a directory of the test's own.
    expect(page.start).toBe(
      'npm start -- --record .tmp/walkthrough     # Ctrl-C after two minutes',
    );
    running = await startService(['--record', recordings]);
    await new Promise((r) => setTimeout(r, 12_000));
    running.child.kill('SIGINT');
    expect(await running.exited).toBe(0);
    const out = running.stdout();
    run.shutdown = out.slice(out.lastIndexOf('SIGINT: '));
    running = undefined;
    run.files = readdirSync(recordings)
      .sort()
      .map((f) => join(recordings, f));
    for (const name of CANDIDATES) {
      // The page's command, with the shell's glob expanded and the page written into `dir`.
      const args = page.commands[name]
        .split(/ +/)
        .flatMap((a) => (a === '.tmp/walkthrough/*.ndjson' ? run.files : [a]))
        .map((a) => (a.endsWith('.html') ? join(dir, a) : a));
      expect(args.slice(0, 3)).toEqual(['npm', 'run', 'replay']);
      const { stdout } = await promisify(execFile)('npm', ['run', '-s', ...args.slice(2)], {
        cwd: ROOT,
        maxBuffer: 16 * 1024 * 1024,
      });
      run.reports[name] = stdout;
    }
  }, 120_000);

  afterAll(async () => {
    await stopService(running);
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('holds together as the page says it does', () => {
    expect(problems(run)).toEqual([]);
  });

  it('recorded every conversation that ended, whole: every reason as many as the shutdown counted, aborted included', () => {
    const lines = run.files.flatMap((f) =>
      readFileSync(f, 'utf8')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as RecordedConversation),
    );
    const reasons: Record<string, number> = {};
    for (const l of lines) reasons[l.ending.reason] = (reasons[l.ending.reason] ?? 0) + 1;
    const { tally } = shutdownFigures(run.shutdown);
    expect(reasons).toEqual(tally);
  });

  it('prints what the page shows, line for line, figures aside', () => {
    const recordings = join(dir, 'walkthrough');
    expect(
      run.shutdown
        .trimEnd()
        .split('\n')
        .map((l) => shape(l, recordings)),
    ).toEqual(
      page.printed.shutdown
        .trimEnd()
        .split('\n')
        .map((l) => shape(l, recordings)),
    );
    for (const name of CANDIDATES) {
      expect(tables(run.reports[name] ?? '', dir)).toEqual(tables(page.printed.reports[name], dir));
    }
  });
});
