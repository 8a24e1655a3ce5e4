/**
 * The rules of the recording format that JSON Schema cannot state, because they relate one part
 * of a line to another (a dispatch to the one before it, the dispatches to the ending's count).
 * This list is their one definition: the reader checks them after the schema
 * (`recordingProblem()`), and the schema's `description` and docs/replay.md state them in these
 * words (a test holds both to this list). A line the schema accepts and the reader refuses breaks
 * one of these, never anything else.
 */
import type { RecordedConversation, RecordedDispatch } from './format.ts';

/** A rule across the fields of one line; `says` is how the schema and the docs state it. */
export interface LineRule {
  /** The rule as the schema's description and docs/replay.md state it. */
  readonly says: string;
  /** Why the whole line breaks it (a line that conforms to the schema), or undefined. */
  readonly line?: (recording: RecordedConversation) => string | undefined;
  /** Why dispatch `i` breaks it, given the one before it (undefined for the first), or undefined. */
  readonly dispatch?: (
    d: RecordedDispatch,
    i: number,
    previous: RecordedDispatch | undefined,
  ) => string | undefined;
}

/** The rules, in the order the reader checks them (line rules first, then dispatch by dispatch). */
export const LINE_RULES: readonly LineRule[] = [
  {
    says: 'dispatches has ending.dispatchCount items, or fewer when truncated is true',
    line: (r) => {
      const length = r.dispatches.length;
      const count = r.ending.dispatchCount;
      if (length > count)
        return `${length} dispatches recorded but ending.dispatchCount is ${count}`;
      if (r.truncated === undefined && length !== count)
        return `${length} dispatches recorded, ending.dispatchCount is ${count} and the line is not truncated`;
      return undefined;
    },
  },
  {
    says: 'dispatches[i].n is i + 1',
    dispatch: (d, i) =>
      d.n === i + 1 ? undefined : `dispatches[${i}].n is ${JSON.stringify(d.n)}, expected ${i + 1}`,
  },
  {
    says: 'dispatches[i].elapsedMs is not less than dispatches[i - 1].elapsedMs',
    dispatch: (d, i, previous) =>
      previous === undefined || d.elapsedMs >= previous.elapsedMs
        ? undefined
        : `dispatches[${i}].elapsedMs is ${d.elapsedMs}, less than the previous dispatch's ${previous.elapsedMs}`,
  },
];

/** Why a line that conforms to the schema breaks one of {@link LINE_RULES}, or undefined. */
export function lineRuleProblem(r: RecordedConversation): string | undefined {
  for (const rule of LINE_RULES) {
    const problem = rule.line?.(r);
    if (problem !== undefined) return problem;
  }
  const dispatchRules = LINE_RULES.filter((rule) => rule.dispatch !== undefined);
  let previous: RecordedDispatch | undefined;
  for (let i = 0; i < r.dispatches.length; i++) {
    const d = r.dispatches[i] as RecordedDispatch;
    for (const rule of dispatchRules) {
      const problem = rule.dispatch?.(d, i, previous);
      if (problem !== undefined) return problem;
    }
    previous = d;
  }
  return undefined;
}

/**
 * The sentence the schema's `description` ends with: the rules a JSON Schema validator cannot
 * check, so that one who validates with the schema alone knows what else a line must be.
 */
export function lineRulesSentence(): string {
  const rules = LINE_RULES.map((rule, i) => `(${i + 1}) ${rule.says}`).join('; ');
  return `JSON Schema cannot relate one part of a line to another, so a line valid against this schema is a recorded conversation only if it also holds these rules, which the reader (readRecordings, replay, the CLI) checks after the schema: ${rules}.`;
}
