/**
 * The reader and the JSON Schema say the same thing about every line (the reader interprets the
 * shipped schema itself), blank lines follow one rule in every input form, and a line past
 * `maxLineBytes` is a RecordingFormatError read in bounded memory, never a crash.
 */
import { closeSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { maxDispatches } from '../../src/index.ts';
import {
  type RecordedConversation,
  RecordingFormatError,
  readRecordings,
  replay,
} from '../../src/replay/index.ts';
import { schemaErrors } from '../helpers/recording-schema.ts';
import { setField, variant, withFields } from '../helpers/recording-variants.ts';
import { tempDirForFile } from '../helpers/temp-dir.ts';

const dir = tempDirForFile('replay-format-');

const good: RecordedConversation = {
  version: 1,
  conversationId: 'c1',
  orchestrator: 'desks',
  startTimeMs: 1_700_000_000_000,
  ending: {
    reason: 'converged',
    policy: 'converged',
    observed: 0.01,
    limit: 0.05,
    dispatchCount: 2,
    elapsedMs: 7.5,
  },
  usage: { inputTokens: 10, outputTokens: 4, cacheReadInputTokens: 2 },
  dispatches: [
    {
      n: 1,
      elapsedMs: 3.25,
      responder: 'a',
      queueDepth: 1,
      tokens: { inputTokens: 5, outputTokens: 2 },
      record: { spread: 1 },
    },
    {
      n: 2,
      elapsedMs: 7.5,
      responder: 'b',
      sender: 'B',
      queueDepth: 0,
      observed: 0.01,
      recordError: 'not JSON: cyclic',
    },
  ],
};

/** A copy of `good` with the fields at the dotted paths given set (`undefined` removes one). */
const changed = (fields: Readonly<Record<string, unknown>>) => withFields(good, fields);

/** Whether the reader accepts one line, strictly. */
async function readerAccepts(line: unknown): Promise<boolean> {
  try {
    for await (const _ of readRecordings([
      typeof line === 'string' ? line : JSON.stringify(line),
    ])) {
      // read it
    }
    return true;
  } catch (error) {
    if (error instanceof RecordingFormatError) return false;
    throw error;
  }
}

/**
 * The corpus: each line with whether the schema accepts it and whether the reader does. They
 * differ only where the schema's description says the reader checks more (order and count).
 */
/** Accepted by both, refused by both, and accepted by the schema only (order and count). */
const BOTH = { schema: true, reader: true };
const NEITHER = { schema: false, reader: false };
const SCHEMA_ONLY = { schema: true, reader: false };

const corpus: [string, unknown, { schema: boolean; reader: boolean }][] = [
  ['a recorded conversation', good, BOTH],
  [
    'a truncated one with fewer dispatches',
    changed({ truncated: true, 'ending.dispatchCount': 9 }),
    BOTH,
  ],
  [
    'an error ending',
    changed({
      ending: { reason: 'error', dispatchCount: 2, elapsedMs: 8, error: 'ResponderError' },
    }),
    BOTH,
  ],
  ['equal elapsed times', changed({ 'dispatches.1.elapsedMs': 3.25 }), BOTH],
  ['a negative dispatch elapsedMs', changed({ 'dispatches.0.elapsedMs': -1 }), NEITHER],
  ['a negative ending elapsedMs', changed({ 'ending.elapsedMs': -1 }), NEITHER],
  ['version 2', changed({ version: 2 }), NEITHER],
  ['a field the format does not have', changed({ extra: 1 }), NEITHER],
  ['a dispatch field the format does not have', changed({ 'dispatches.0.content': 'hi' }), NEITHER],
  ['a missing conversationId', changed({ conversationId: undefined }), NEITHER],
  ['a fractional queueDepth', changed({ 'dispatches.0.queueDepth': 1.5 }), NEITHER],
  ['negative tokens', changed({ 'usage.inputTokens': -3 }), NEITHER],
  ['truncated: false', changed({ truncated: false }), NEITHER],
  ['n = 0', changed({ 'dispatches.0.n': 0 }), NEITHER],
  ['a string startTimeMs', changed({ startTimeMs: '0' }), NEITHER],
  ['a null ending', changed({ ending: null }), NEITHER],
  ['an array', [good], NEITHER],
  [
    'dispatches out of order (n)',
    changed({ 'dispatches.0.n': 2, 'dispatches.1.n': 1 }),
    SCHEMA_ONLY,
  ],
  ['elapsedMs decreasing across dispatches', changed({ 'dispatches.1.elapsedMs': 1 }), SCHEMA_ONLY],
  [
    'fewer dispatches than counted, not truncated',
    changed({ 'ending.dispatchCount': 3 }),
    SCHEMA_ONLY,
  ],
  [
    'more dispatches than counted',
    changed({ 'ending.dispatchCount': 1, truncated: true }),
    SCHEMA_ONLY,
  ],
];

describe('the reader and the JSON Schema agree', () => {
  for (const [what, line, expected] of corpus) {
    it(`${expected.reader ? 'accepts' : 'refuses'} ${what}${expected.schema === expected.reader ? ', as the schema does' : ' (order and count: the schema cannot say, its description does)'}`, async () => {
      expect({
        schema: schemaErrors(line).length === 0,
        reader: await readerAccepts(line),
      }).toEqual(expected);
    });
  }

  it('says where and why for a negative elapsedMs and a decreasing one', async () => {
    await expect(
      replay([JSON.stringify(good), JSON.stringify(corpus[4]?.[1])], maxDispatches(9)),
    ).rejects.toThrow(
      '<input>:2: not a recorded conversation: dispatches[0].elapsedMs is -1, expected at least 0',
    );
    await expect(
      replay([corpus[18]?.[1] as RecordedConversation], maxDispatches(9)),
    ).rejects.toThrow(
      "<input>:1: not a recorded conversation: dispatches[1].elapsedMs is 1, less than the previous dispatch's 3.25",
    );
  });

  it('agrees with ajv on a thousand random changes to a line', async () => {
    const values = fc.constantFrom<unknown>(
      -1,
      0,
      1,
      1.5,
      2 ** 60,
      'x',
      '',
      null,
      true,
      [],
      {},
      { inputTokens: 1, outputTokens: 1 },
    );
    const fields = fc.constantFrom(
      ['version'],
      ['conversationId'],
      ['orchestrator'],
      ['startTimeMs'],
      ['usage'],
      ['truncated'],
      ['extra'],
      ['ending', 'reason'],
      ['ending', 'policy'],
      ['ending', 'observed'],
      ['ending', 'limit'],
      ['ending', 'dispatchCount'],
      ['ending', 'elapsedMs'],
      ['ending', 'error'],
      ['ending', 'extra'],
      ['dispatches', '0', 'elapsedMs'],
      ['dispatches', '1', 'responder'],
      ['dispatches', '0', 'sender'],
      ['dispatches', '1', 'queueDepth'],
      ['dispatches', '0', 'tokens'],
      ['dispatches', '1', 'usage'],
      ['dispatches', '0', 'observed'],
      ['dispatches', '1', 'record'],
      ['dispatches', '0', 'recordError'],
      ['dispatches', '1', 'extra'],
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fields, fc.option(values, { nil: undefined })), {
          minLength: 1,
          maxLength: 3,
        }),
        async (changes) => {
          const line = variant(good, (r) => {
            for (const [path, value] of changes) setField(r, path, value);
          }) as RecordedConversation;
          // What only the reader checks, said independently: order, and the count against the ending's.
          const schemaOk = schemaErrors(line).length === 0;
          const orderOk =
            !schemaOk ||
            (line.dispatches.length <= line.ending.dispatchCount &&
              (line.truncated === true || line.dispatches.length === line.ending.dispatchCount) &&
              line.dispatches.every(
                (d, i) =>
                  d.n === i + 1 &&
                  (i === 0 || d.elapsedMs >= (line.dispatches[i - 1]?.elapsedMs ?? 0)),
              ));
          expect(await readerAccepts(line)).toBe(schemaOk && orderOk);
        },
      ),
      { numRuns: 1_000, seed: 33 },
    );
  });
});

describe('blank lines: one rule in every input form', () => {
  const text = JSON.stringify(good);
  const blanks = ['', '   ', '\t', '\r'];

  it('passes over blank lines (nothing or white space) in a file, an array and an iterable, with or without skipBad, and counts the line numbers past them', async () => {
    const path = join(dir, 'blank.ndjson');
    writeFileSync(path, `${text}\n\n   \n\t\n\r\n${text}\nnope\n`);
    async function* lines() {
      yield* [text, ...blanks, text, 'nope'];
    }
    const array = [text, ...blanks, text, 'nope'];
    for (const [source, file] of [
      [path, path],
      [array, '<input>'],
      [lines(), '<input>'],
    ] as const) {
      await expect(replay(source, maxDispatches(9))).rejects.toThrow(`${file}:7: not JSON`);
    }
    for (const source of [path, array]) {
      const skipped: number[] = [];
      const report = await replay(source, maxDispatches(9), {
        skipBad: true,
        onBadLine: (e) => skipped.push(e.line),
      });
      expect([report.conversations, report.skippedLines, skipped]).toEqual([2, 1, [7]]);
    }
  });
});

describe('a line past maxLineBytes', () => {
  it('is a RecordingFormatError with its file and line, and the lines after it are read (skipBad)', async () => {
    const path = join(dir, 'long.ndjson');
    const long = JSON.stringify({ ...good, conversationId: 'x'.repeat(5_000) });
    writeFileSync(path, `${whole()}\n${long}\n${whole()}\n${long}`);
    const error = await replay(path, maxDispatches(9), { maxLineBytes: 4_096 }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(RecordingFormatError);
    expect((error as RecordingFormatError).message).toBe(
      `${path}:2: longer than 4096 bytes (maxLineBytes; the recorder writes lines of at most its maxLineChars)`,
    );
    const skipped: number[] = [];
    const report = await replay(path, maxDispatches(9), {
      maxLineBytes: 4_096,
      skipBad: true,
      onBadLine: (e) => skipped.push(e.line),
    });
    expect([report.conversations, skipped]).toEqual([2, [2, 4]]);
    // The same line given as a string in an array: the same rule.
    await expect(
      replay([whole(), long], maxDispatches(9), { maxLineBytes: 4_096 }),
    ).rejects.toThrow('<input>:2: longer than 4096 bytes');
    // At the limit exactly it is read.
    const report2 = await replay(path, maxDispatches(9), { maxLineBytes: Buffer.byteLength(long) });
    expect(report2.conversations).toBe(4);
  });

  it('with the default limit (16 MiB), a 600 MB line (a sparse file, never in memory) is an error naming its line, not a crash, and the next line is read', async () => {
    const path = join(dir, 'huge.ndjson');
    const fd = openSync(path, 'w');
    writeSync(fd, `${whole()}\n{"version":1,"conversationId":"`);
    // 600 MB of the file never written: a hole, read back as zero bytes.
    writeSync(fd, `"}\n${whole()}\n`, 600 * 1024 * 1024);
    closeSync(fd);
    await expect(replay(path, maxDispatches(9))).rejects.toThrow(
      `${path}:2: longer than 16777216 bytes`,
    );
    const report = await replay(path, maxDispatches(9), { skipBad: true });
    expect([report.conversations, report.skippedLines]).toEqual([2, 1]);
  }, 60_000);

  it('refuses a maxLineBytes that is not a positive integer', () => {
    expect(() => readRecordings([], { maxLineBytes: 0 })).toThrow(
      'Expected `readRecordings({ maxLineBytes })` to be a positive integer, got `0` (number)',
    );
  });
});

function whole(): string {
  return JSON.stringify(good);
}
