/**
 * One source for the recording format (issue 43, finding 13). The shape of a line is
 * schemas/recording.schema.json, which the reader interprets as it is; what JSON Schema cannot
 * state (one dispatch against the one before it, the dispatches against the ending's count) is
 * src/replay/line-rules.ts, which the reader checks after the schema and which the schema's
 * description and docs/replay.md state in its words. So ajv (the schema alone), the reader and
 * replay() are run on one hostile corpus: they agree on every line, except lines that break a
 * rule of line-rules.ts, and each such rule is stated in the schema that accepts them.
 *
 * `UPDATE_RECORDING_SCHEMA=1 npx vitest run test/replay/schema-source.test.ts` writes the
 * schema's generated text after a change to the rules.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { maxDispatches } from '../../src/index.ts';
import { type RecordedConversation, replay } from '../../src/replay/index.ts';
import { LINE_RULES, lineRuleProblem, lineRulesSentence } from '../../src/replay/line-rules.ts';
import { recordingProblem } from '../../src/replay/read.ts';
import { schemaErrors } from '../helpers/recording-schema.ts';
import { variant, withFields } from '../helpers/recording-variants.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const SCHEMA_PATH = join(ROOT, 'schemas/recording.schema.json');

/** What the recorder writes first in the schema's description; the rules' sentence follows. */
const DESCRIPTION =
  'Written by createConversationRecorder() from conversation-orchestrator/replay: one JSON object per line (NDJSON), one line per conversation, when it ends. See docs/replay.md.';
const COMMENT =
  'The reader interprets this file as it is (src/replay/schema.ts), then checks the rules the description ends with, defined once in src/replay/line-rules.ts; test/replay/schema-source.test.ts holds this text to them.';

/** The schema as the rules make it: the committed shape, the generated description and comment. */
function generatedSchema(committed: Record<string, unknown>): Record<string, unknown> {
  const { $schema, $id, title, description: _d, $comment: _c, ...rest } = committed;
  return {
    $schema,
    $id,
    title,
    description: `${DESCRIPTION} ${lineRulesSentence()}`,
    $comment: COMMENT,
    ...rest,
  };
}

const committedText = readFileSync(SCHEMA_PATH, 'utf8');
const committed = JSON.parse(committedText) as Record<string, unknown>;
if (process.env.UPDATE_RECORDING_SCHEMA === '1') {
  // Only the two generated strings are replaced: the rest keeps its formatting (biome's).
  const generated = generatedSchema(committed);
  const text = committedText
    .replace(
      /^ {2}"description": ".*",$/m,
      () => `  "description": ${JSON.stringify(generated.description)},`,
    )
    .replace(
      /^ {2}"\$comment": ".*",$/m,
      () => `  "$comment": ${JSON.stringify(generated.$comment)},`,
    );
  writeFileSync(SCHEMA_PATH, text);
}

const good: RecordedConversation = {
  version: 1,
  conversationId: 'c1',
  orchestrator: 'desks',
  startTimeMs: 1_700_000_000_000,
  ending: { reason: 'converged', policy: 'converged', dispatchCount: 3, elapsedMs: 9 },
  usage: { inputTokens: 10, outputTokens: 4 },
  dispatches: [
    { n: 1, elapsedMs: 2, responder: 'a', queueDepth: 1, record: { spread: 3 } },
    {
      n: 2,
      elapsedMs: 5.5,
      responder: 'b',
      queueDepth: 1,
      tokens: { inputTokens: 5, outputTokens: 2 },
    },
    { n: 3, elapsedMs: 9, responder: 'a', sender: 'A', queueDepth: 0, observed: 0.01 },
  ],
};

/** A copy of `good` with the fields at the dotted paths given set (`undefined` removes one). */
const changed = (fields: Readonly<Record<string, unknown>>) => withFields(good, fields);

/** Hostile lines, each by what is wrong with it. */
const hostile: [string, unknown][] = [
  ['nothing', good],
  ['elapsedMs decreasing from dispatch 1 to 2', changed({ 'dispatches.1.elapsedMs': 1 })],
  ['elapsedMs decreasing at the last dispatch', changed({ 'dispatches.2.elapsedMs': 5.4 })],
  ['elapsedMs decreasing by a hair', changed({ 'dispatches.1.elapsedMs': 1.9999999999 })],
  [
    'elapsedMs all equal',
    variant(good, (r) => {
      for (const d of r.dispatches) d.elapsedMs = 2;
    }),
  ],
  ['elapsedMs negative', changed({ 'dispatches.0.elapsedMs': -1 })],
  ['elapsedMs a string', changed({ 'dispatches.1.elapsedMs': '5' })],
  ['elapsedMs missing', changed({ 'dispatches.1.elapsedMs': undefined })],
  ['n out of order', changed({ 'dispatches.0.n': 2, 'dispatches.1.n': 1 })],
  ['n with a gap', changed({ 'dispatches.2.n': 4 })],
  ['n repeated', changed({ 'dispatches.1.n': 1 })],
  ['n = 0', changed({ 'dispatches.0.n': 0 })],
  ['more dispatches than counted', changed({ 'ending.dispatchCount': 2 })],
  ['fewer, not truncated', changed({ 'ending.dispatchCount': 4 })],
  ['fewer, truncated', changed({ 'ending.dispatchCount': 40, truncated: true })],
  ['more, truncated', changed({ 'ending.dispatchCount': 1, truncated: true })],
  ['no dispatches, counted 0', changed({ dispatches: [], 'ending.dispatchCount': 0 })],
  ['truncated: false', changed({ truncated: false })],
  ['a field the format does not have', changed({ 'dispatches.0.content': 'hi' })],
  ['another version', changed({ version: 2 })],
  ['a null dispatch', changed({ 'dispatches.1': null })],
  ['dispatches an object', changed({ dispatches: { 0: good.dispatches[0] } })],
  ['decreasing and misnumbered', changed({ 'dispatches.1.elapsedMs': 1, 'dispatches.2.n': 7 })],
  [
    'decreasing and miscounted',
    changed({ 'dispatches.1.elapsedMs': 1, 'ending.dispatchCount': 5 }),
  ],
  ['decreasing and a bad field', changed({ 'dispatches.1.elapsedMs': 1, extra: 1 })],
  ['not an object', 'a line'],
  ['null', null],
];

/** Whether replay() takes the line (as NDJSON text, the way a file gives it). */
async function replayAccepts(line: unknown): Promise<boolean> {
  return replay([JSON.stringify(line)], maxDispatches(99)).then(
    () => true,
    (error: unknown) => {
      if (error instanceof Error && error.name === 'RecordingFormatError') return false;
      throw error;
    },
  );
}

/** Why `line` breaks one rule (the first place it does), or undefined. */
function breaks(rule: (typeof LINE_RULES)[number], line: RecordedConversation): string | undefined {
  return (
    rule.line?.(line) ??
    line.dispatches
      .map((d, i, all) => rule.dispatch?.(d, i, all[i - 1]))
      .find((p) => p !== undefined)
  );
}

/** The schema's description, as a validator and an editor show it. */
const described = String(committed.description);

/**
 * What ajv, the reader and replay() say about a line, and whether that is one story: they agree,
 * or the schema accepts and the reader refuses for a rule of line-rules.ts the schema states.
 */
async function verdicts(line: unknown) {
  const schema = schemaErrors(line).length === 0;
  const problem = recordingProblem(line);
  const replayed = await replayAccepts(line);
  const rule = schema ? lineRuleProblem(line as RecordedConversation) : undefined;
  const broken = LINE_RULES.find(
    (r) => rule !== undefined && breaks(r, line as RecordedConversation) === rule,
  );
  return {
    reader: problem === undefined,
    replay: replayed,
    // The schema's verdict and, where it is more lenient, the rule it states that the line breaks.
    schema,
    explained:
      schema === (problem === undefined) ||
      (schema && problem === rule && broken !== undefined && described.includes(broken.says)),
  };
}

describe('one source for the recording format', () => {
  it('the committed schema is the generated one: the shape as committed, the description ending with the rules of line-rules.ts', () => {
    // Compared as JSON text of the parsed values: the same keys in the same order, the same values.
    expect(JSON.stringify(committed, null, 2)).toBe(
      JSON.stringify(generatedSchema(committed), null, 2),
    );
  });

  it("the schema's description says a decreasing elapsedMs is not a recorded conversation, as replay() says", async () => {
    const decreasing = hostile[1]?.[1];
    expect(schemaErrors(decreasing)).toEqual([]);
    expect(described).toContain(
      'dispatches[i].elapsedMs is not less than dispatches[i - 1].elapsedMs',
    );
    await expect(replay([decreasing as RecordedConversation], maxDispatches(9))).rejects.toThrow(
      "<input>:1: not a recorded conversation: dispatches[1].elapsedMs is 1, less than the previous dispatch's 2",
    );
  });

  it('docs/replay.md states every rule in the same words', () => {
    const page = readFileSync(join(ROOT, 'docs/replay.md'), 'utf8');
    for (const rule of LINE_RULES) expect(page).toContain(`- \`${rule.says}\``);
  });

  it.each(hostile)(
    'ajv, the reader and replay() tell one story about a line with %s',
    async (_what, line) => {
      const v = await verdicts(line);
      expect(v.replay).toBe(v.reader);
      expect(v.explained).toBe(true);
    },
  );

  it('and on a thousand random changes to the elapsed times, numbers and counts', async () => {
    const elapsed = fc.oneof(
      fc.double({ min: -1, max: 20, noNaN: true }),
      fc.constantFrom(0, 2, 5.5, 9),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.tuple(fc.integer({ min: 0, max: 2 }), elapsed, fc.integer({ min: 0, max: 4 })),
          { maxLength: 3 },
        ),
        fc.integer({ min: 0, max: 5 }),
        fc.boolean(),
        async (changes, count, truncated) => {
          const line = variant(good, (r) => {
            for (const [i, ms, n] of changes) {
              r.dispatches[i].elapsedMs = ms;
              r.dispatches[i].n = n;
            }
            r.ending.dispatchCount = count;
            if (truncated) r.truncated = true;
          });
          const v = await verdicts(line);
          expect(v.replay).toBe(v.reader);
          expect(v.explained).toBe(true);
        },
      ),
      { numRuns: 1_000, seed: 43 },
    );
  });
});
